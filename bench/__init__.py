"""Benchmarks: `./dev bench [NAME]` runs bench/bench_NAME.py (all of them without NAME)."""
