"""Pulsar 5.0's scalable-topics transaction coordinator in the upgrade check: pure judgements over the brokers'
runtime configuration (Observations.brokers), for upgrade.py.

Pulsar's own words for the setting (ServiceConfiguration's doc of `transactionCoordinatorScalableTopicsEnabled`):
it needs `transactionCoordinatorEnabled=true` and must be on together with the scalable-topic transaction buffer
and pending-ack store providers, which 5.0 ships as the dispatching ones. A broker runs it for the coordinator
partitions (`transaction_coordinator_assign`) it owns, so a scalable-topics client meets whichever coordinator
the owner of its partition runs: every broker must run 5.0 and have the same setting. 5.0.0-M1 turns it on by
default (docs/real-broker-findings.md).
"""

from __future__ import annotations

from pulsar_txn_cli.admin.features import release
from pulsar_txn_cli.names import parse_bool

SETTING = "transactionCoordinatorScalableTopicsEnabled"
SINCE = (5, 0)
COORDINATOR = "transactionCoordinatorEnabled"
PROVIDERS = {
    "transactionBufferProviderClassName": "org.apache.pulsar.broker.transaction.buffer.impl."
    "DispatchingTransactionBufferProvider",
    "transactionPendingAckStoreProviderClassName": "org.apache.pulsar.broker.transaction.pendingack.impl."
    "DispatchingTransactionPendingAckStoreProvider",
}


def flag(broker) -> bool | None:
    """A broker's setting: True/False as its runtime configuration says, None when it has none (before 5.0)."""
    return parse_bool((broker.runtime or {}).get(SETTING))


def upgrade_problems(brokers) -> tuple[list[str], list[str], list[str]]:
    """(blocked, incomplete, fixes) for turning the scalable-topics coordinator on; nothing while no broker has
    it on (it then changes nothing, whatever the versions)."""
    read = [b for b in brokers if b.runtime is not None]
    on = [b for b in read if flag(b)]
    if not on:
        return [], [], []
    blocked, incomplete, fixes = [], [], []
    older = [b for b in read if b.version and (release(b.version) or SINCE) < SINCE]
    if older:
        incomplete.append(
            f"the scalable-topics transaction coordinator ({SETTING}) is on on {_names(on)} while {_names(older)} "
            f"run(s) {older[0].version}, which has none: a coordinator partition such a broker owns serves only "
            "classic transactions, so no client should use scalable-topics transactions until every broker runs 5.0"
        )
    off = [b for b in read if b not in older and flag(b) is False]
    if off:
        incomplete.append(
            f"{SETTING} is on on {_names(on)} and off on {_names(off)}: the owner of a coordinator partition decides "
            "which coordinator a client meets, so set it the same on every broker (broker.conf, then a restart)"
        )
    for broker in on:
        runtime = broker.runtime or {}
        if parse_bool(runtime.get(COORDINATOR)) is False:
            blocked.append(f"broker {broker.broker} has {SETTING} on but {COORDINATOR} off: it needs both")
            fixes.append(f"set {COORDINATOR}=true in {broker.broker}'s broker.conf and restart it")
        for key, provider in PROVIDERS.items():
            value = str(runtime.get(key) or "")
            if value != provider:
                blocked.append(
                    f"broker {broker.broker} has {SETTING} on with {key}={value or '(unset)'}: the scalable-topics "
                    f"coordinator must run with 5.0's {provider.rsplit('.', 1)[1]}, or the topics' buffers and "
                    "pending-ack stores do not keep its transactions"
                )
                fixes.append(f"set {key}={provider} (or {SETTING}=false) in broker.conf and restart the broker")
    return blocked, incomplete, list(dict.fromkeys(fixes))


def _names(brokers) -> str:
    names = [b.broker for b in brokers]
    return (
        names[0]
        if len(names) == 1
        else f"{len(names)} brokers ({', '.join(names[:3])}{', …' if len(names) > 3 else ''})"
    )


# What a rollback to 4.x meets, as the real one showed (5.0.0-M1 to 4.2.4 on the same metadata store and bookie,
# tests/integration/test_second_coordinator.py): the 4.x broker starts, its classic coordinators load from their
# logs (5.0 writes them as 4.x does), their transactions commit and every committed message stays readable. The
# scalable-topics coordinator's transactions that a persistent:// topic's buffer still counts stay open there
# (4.x recovers them from the topic's own ledger and no coordinator of its own can end them), so that topic's
# readers stay held; its records under /txn stay in the metadata store, unread.
ROLLBACK = (
    "the scalable-topics transaction coordinator ({setting}) is on: a 4.x broker has none, and rolled back onto "
    "this metadata and these bookies (tried: 5.0.0-M1 to 4.2.4) its classic coordinators load and work, but every "
    "transaction of the scalable-topics coordinator that a topic's buffer still counts stays open there for good, "
    "holding that topic's readers, and its records under /txn stay in the metadata store, unread"
)


def rollback_blockers(view) -> tuple[list[str], list[str]]:
    """(blocked, waiting) for the downgrade verdict: open transactions of the scalable-topics coordinator that
    a 4.x broker would keep open for good need an operator before a rollback; a count that cannot be read
    may be read at the next check."""
    if view is None:
        return [], []
    if view.error:
        return [], [
            "how many open transactions of Pulsar 5.0's scalable-topics coordinator the buffers count could not be "
            f"read ({view.error}); a broker rolled back to 4.x would keep each of them open for good"
        ]
    if not view.counted:
        return [], []
    topics = _first_topics(view)
    return [
        f"the buffers count {view.total} open transaction(s) of Pulsar 5.0's scalable-topics coordinator on "
        f"{len(view.counted)} topic(s) ({topics}): a broker rolled back to 4.x keeps each of them open for good and "
        "holds those topics' readers (tried: 5.0.0-M1 to 4.2.4); their clients must end them on 5.0 first"
    ], []


def rollback_problems(view) -> list[str]:
    """Sentences for `downgrade check` where a broker has the scalable-topics coordinator on. `view`: the
    SecondCoordinator (scalable_coordinator.py), or None when no broker has it on."""
    if view is None:
        return []
    out = [ROLLBACK.format(setting=SETTING)]
    if view.error:
        out.append(f"how many such transactions the buffers count now could not be read: {view.error}")
    elif view.counted:
        topics = _first_topics(view)
        out.append(
            f"the buffers count {view.total} open transaction(s) that no classic coordinator lists, on "
            f"{len(view.counted)} topic(s) ({topics}): a rollback keeps them open and their readers held; their "
            "clients must end them on 5.0 first"
        )
    return out


def _first_topics(view) -> str:
    """The first few topics whose buffers count such transactions, for a sentence."""
    return ", ".join(sorted(view.counted)[:3]) + (" and more" if len(view.counted) > 3 else "")
