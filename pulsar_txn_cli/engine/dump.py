"""`engine dump`: managed-ledger entries in the project's JSONL dump format."""

from __future__ import annotations

from pulsar_txn_cli.codec import PENDING_ACK_LOG, TC_LOG, log_of_managed_ledger
from pulsar_txn_cli.codec.dumps import dump_line, dump_object  # noqa: F401 - dump_object for callers
from pulsar_txn_cli.engine.broker import unknown_managed_ledger
from pulsar_txn_cli.errors import UsageError


def select(engine, names: list[str] | None, log: str = "all") -> list[str]:
    """The managed ledgers to dump: the named ones, else every transaction log (of one kind)."""
    known = engine.managed_ledger_names()
    if names:
        for name in names:
            if name not in known:
                raise unknown_managed_ledger(name)
        return list(names)
    if log == "any":
        return known  # every managed ledger, topics and snapshot topics included
    kinds = {"all": (TC_LOG, PENDING_ACK_LOG), "tc": (TC_LOG,), "pending-ack": (PENDING_ACK_LOG,)}
    if log not in kinds:
        raise UsageError(
            f"--log must be tc, pending-ack, all (both transaction logs) or any (every managed ledger), not {log!r}"
        )
    return [n for n in known if log_of_managed_ledger(n) in kinds[log]]


def lines(engine, names: list[str], render=dump_line):
    """One JSONL line (or, with render=dump_object, one object) per stored entry, in ledger order."""
    for name in names:
        ml = engine.managed_ledger(name)
        for lid, eid, data in ml.read_all():
            yield render(name, lid, eid, data)


def listing(engine) -> list[dict]:
    out = []
    for name in engine.managed_ledger_names():
        ml = engine.managed_ledger(name)
        out.append(
            {
                "managedLedger": name,
                "log": log_of_managed_ledger(name) or "topic",
                "ledgers": [l.ledger_id for l in ml.ledgers],
                "entries": sum(l.entries for l in ml.ledgers),
                "size": sum(l.size for l in ml.ledgers),
            }
        )
    return out
