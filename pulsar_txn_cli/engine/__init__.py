"""The embedded engine: a durable local model of the parts of a Pulsar broker that PIP-160 touches.

Modules: store (SQLite, lock, commits), clock (virtual time and timers), config (broker keys),
ledger (managed ledgers and cursors), writer (TxnLogBufferedWriter), metrics, coordinator (TCs),
pending_ack (pending-ack stores), engine (the broker: loading, reload, transactions), simulate,
verify, dump, rest (Pulsar's admin REST paths over the engine).
"""
