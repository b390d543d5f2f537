"""The transaction buffer of the embedded engine (per topic partition), and its snapshots.

buffer.py: maxReadPosition, ongoing transactions, aborts, dispatch filtering, low-water marks.
aborts.py: the aborted-id map, single or segmented (PIP-178 as shipped).
snapshots.py: the snapshot objects and the system topics they are written to.
messages.py: topic entries (messages and commit/abort markers); positions.py: "L:E" and "(m,l)".
log.py: what the buffer needs of a managed ledger, and an in-memory one for tests.
ledgers.py: the engine's managed ledgers behind that interface.
settings.py: the four broker settings; stats.py: the admin JSON shapes.
service.py: every topic's buffer in one engine (the engine holds one and calls it; the engine's
router registers the buffer's REST paths). Nothing here imports the engine's upper layers.
"""
