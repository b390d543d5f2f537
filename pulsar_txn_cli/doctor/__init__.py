"""The transactions doctor: what blocks a cluster's transactions, each check a pure judgement over
what was read (read.py), one module per group of checks, run together by run.py."""
