"""The judgement of one store, pure (no I/O): is batching effective there, and why (or why unknown)."""

from __future__ import annotations

from pulsar_txn_cli.admin import features
from pulsar_txn_cli.output.units import iso_millis


def effective(
    store: dict, setting: str, configured: bool | None, dynamic: bool | None, change: dict | None, key: str, release
) -> tuple[bool | None, str]:
    """judge(), unless every broker predates PIP-160 (RELEASE names the release): then no store batches."""
    if release:
        return False, features.no_batched_logs(release, setting)
    return judge(store, configured, dynamic, change, key)


def judge(
    store: dict, configured: bool | None, dynamic: bool | None, change: dict | None, key: str
) -> tuple[bool | None, str]:
    """(effective, reason) for one store. Pure: no I/O."""
    start = store.get("recoverStartTime") or 0
    state = store.get("state")
    if store.get("discovery") == "orphan":
        return None, "the subscription no longer exists; only its pending-ack ledger remains"
    if state != "Ready" or not start:
        shown = "not loaded" if state is None else f"in state {state}"
        return None, f"the store is {shown}; when it opens it will use the configured value"
    if change is None:
        if dynamic is None:
            if configured is None:
                return None, "the brokers disagree on the setting and nothing says which broker opened this store"
            return configured, "set in the brokers' configuration files; no dynamic change on record"
        return None, (
            "the dynamic setting was changed outside pulsar-txn, so the moment of the change is unknown; "
            "set it with this tool or reload the store (--reload) to know"
        )
    at = change.get("at") or 0
    if configured is not None and change.get("value") != configured:
        return (
            None,
            f"the setting was changed again outside pulsar-txn after {iso_millis(at)}; the moment of that change is unknown",
        )
    snapshot = change.get("recoverStartTimes")
    if snapshot is not None:  # the store's open time at the change: moved (or new store) = reopened since
        reopened = key not in snapshot or start != snapshot[key]
    else:
        reopened = start >= at
    if reopened:
        return change.get(
            "value"
        ), f"the store was reopened (at {iso_millis(start)}) after the change at {iso_millis(at)}"
    previous = (change.get("runningBefore") or {}).get(key, change.get("previous"))
    if previous is None:
        return (
            None,
            f"the store was not reopened since the change at {iso_millis(at)}, and the value before the change is unknown",
        )
    return (
        previous,
        f"the store was not reopened since the change at {iso_millis(at)} (opened at {iso_millis(start)}); reload it for the change to take effect",
    )
