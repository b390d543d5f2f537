"""How long a transaction may stay open, and what ends one that stays longer.

Shared by `doctor`, `find-hanging`/`abort-hanging` and the downgrade verdict, which judge open
transactions by the same bounds and offer the same remedies.
"""

from __future__ import annotations

from pulsar_txn_cli.admin.features import release
from pulsar_txn_cli.names import TxnID

ABORT_SINCE = (3, 2)  # PIP-325's abortTransaction endpoint


def timeout_ms(meta: dict) -> int | None:
    """timeoutAt is the transaction's timeout as a duration in ms, despite its name (real-broker finding)."""
    value = meta.get("timeoutAt")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def age_ms(meta: dict, now_ms: int) -> int | None:
    opened = meta.get("openTimestamp")
    return max(now_ms - opened, 0) if isinstance(opened, int) and not isinstance(opened, bool) else None


def bound_ms(meta: dict, older_than_ms: int | None) -> int | None:
    """How long a transaction may stay open before it counts as hanging: --older-than, else half its timeout."""
    if older_than_ms is not None:
        return older_than_ms
    timeout = timeout_ms(meta)
    return max(timeout // 2, 1) if timeout else None


def past_timeout(meta: dict, now_ms: int) -> bool:
    age, timeout = age_ms(meta, now_ms), timeout_ms(meta)
    return age is not None and timeout is not None and age > timeout


def is_hanging(meta: dict, now_ms: int, older_than_ms: int | None) -> bool:
    age, bound = age_ms(meta, now_ms), bound_ms(meta, older_than_ms)
    return past_timeout(meta, now_ms) or (age is not None and bound is not None and age > bound)


def abort_supported(versions: list[str]) -> bool:
    """False only when some broker is known to predate PIP-325 (3.2): it has no abort endpoint."""
    return not any((release(v) or (99,)) < ABORT_SINCE for v in versions)


ENDING = ("COMMITTING", "ABORTING")  # already ending: only the coordinator can finish it, an abort is refused


def abort_fix(txn_id: str, versions: list[str], status: str | None = None) -> list[str]:
    """What ends the transaction: its abort, or (before Pulsar 3.2, or once it is COMMITTING or ABORTING,
    when the broker answers an abort with 500 "expected OPEN") the reload of its coordinator, which
    replays its log and finishes the end it had begun."""
    most, least = TxnID.parse(txn_id)
    if abort_supported(versions) and status not in ENDING:
        return [f"pulsar-txn abort-transaction -m {most} -l {least} --yes"]
    return [reload_coordinator(most)]


def reload_coordinator(coordinator_id: int) -> str:
    return f"pulsar-txn unload --coordinator {coordinator_id} --yes"


ENDING_ADVICE = (
    'it is {status} already: an abort cannot end it (the broker answers 500 "expected OPEN"); its coordinator '
    "finishes the end when it reloads (the fix), once every partition and subscription it wrote to can take its "
    "end marker: fix the transaction buffer or pending-ack store listed before it first, if any"
)


def abort_advice(versions: list[str]) -> str | None:
    if abort_supported(versions):
        return None
    return (
        f"these brokers ({', '.join(versions)}) predate Pulsar 3.2, which added the abort endpoint (PIP-325): "
        "a transaction ends at its timeout; one left open past it (apache/pulsar#19200, fixed in 2.9.5, 2.10.4 "
        "and 2.11.1) is aborted when its coordinator reloads, which unloading its transaction_coordinator_assign "
        "partition does; or restart the client that owns it so it aborts its own transactions"
    )
