"""The transaction buffer of the embedded engine (per topic partition), and its snapshots.

buffer.py: maxReadPosition, ongoing transactions, aborts, dispatch filtering, low-water marks.
aborts.py: the aborted-id map, single or segmented (PIP-178 as shipped).
snapshots.py: the snapshot objects and the system topics they are written to.
log.py: what the buffer needs of a managed ledger, and an in-memory one for tests.
"""
