"""Which target a command talks to and what the tool keeps about it: the target flags and their
resolution (settings.py), and the records kept per target identity (remembered.py)."""
