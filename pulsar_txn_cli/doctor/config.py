"""config: transactions enabled on every broker, system topics that can exist, batched logs with
batch-index acknowledgements off, and brokers that disagree (apache/pulsar#10871). A pure judgement
over every broker's runtime configuration."""

from __future__ import annotations

from pulsar_txn_cli.doctor.findings import ERROR, WARNING, Finding, evidence
from pulsar_txn_cli.names import parse_bool
from pulsar_txn_cli.protocol import BATCH_INDEX_KEY, BATCH_KEYS, BROKER_RUNTIME, COORDINATOR_ENABLED_KEY

RUNTIME = f"GET {{}}{BROKER_RUNTIME}"  # the broker's web URL, then the path PulsarAdmin.runtime_config asks
ENABLED, BATCH_INDEX = COORDINATOR_ENABLED_KEY, BATCH_INDEX_KEY
# Settings that must agree across brokers: a coordinator or topic moves between them.
SHARED = (
    ENABLED,
    *BATCH_KEYS,
    BATCH_INDEX,
    "transactionBufferSegmentedSnapshotEnabled",
    "systemTopicEnabled",
    "allowAutoTopicCreation",
    "transactionBufferSnapshotMaxTransactionCount",
    "transactionBufferSnapshotMinTimeInMillis",
    "transactionPendingAckLogIndexMinLag",
)


def config(reading, engine_fix) -> list[Finding]:
    """engine_fix(key, value) -> a command that sets it on this target, or None (a cluster: broker.conf)."""
    runtimes = {url: b["runtime"] for url, b in sorted(reading.brokers.items()) if b.get("runtime")}
    out = []
    for url, runtime in runtimes.items():
        out += _one_broker(url, runtime, engine_fix)
    out += _disagreements(runtimes)
    return out


def _flag(runtime: dict, key: str) -> bool | None:
    return parse_bool(runtime.get(key))


def _one_broker(url: str, runtime: dict, engine_fix) -> list[Finding]:
    out = []
    where = RUNTIME.format(url)
    if _flag(runtime, ENABLED) is False:
        fix = engine_fix(ENABLED, "true")
        return [
            Finding(
                "config",
                ERROR,
                f"broker {url}",
                f"{ENABLED}=false: this broker loads no coordinator and refuses every transactional request",
                [evidence(where, **{ENABLED: runtime.get(ENABLED)})],
                [fix] if fix else [],
                f"set {ENABLED}=true in its broker.conf and restart it",
            )
        ]
    for key, why in (
        ("systemTopicEnabled", "transaction buffers keep their snapshots in system topics"),
        (
            "allowAutoTopicCreation",
            "the buffers' snapshot system topics (__transaction_buffer_snapshot) cannot be created "
            "(apache/pulsar#10871) unless they exist already or a namespace policy allows it",
        ),
    ):
        if _flag(runtime, key) is False:
            out.append(
                Finding(
                    "config",
                    ERROR if key == "systemTopicEnabled" else WARNING,
                    f"broker {url}",
                    f"{key}=false with transactions on: {why}",
                    [evidence(where, **{key: runtime.get(key), ENABLED: runtime.get(ENABLED)})],
                    [],
                    f"set {key}=true in broker.conf and restart, or create the system topics of every namespace "
                    "that uses transactions",
                )
            )
    batching = [k for k in BATCH_KEYS if _flag(runtime, k)]
    if batching and _flag(runtime, BATCH_INDEX) is False:
        fix = engine_fix(BATCH_INDEX, "true")
        out.append(
            Finding(
                "config",
                WARNING,
                f"broker {url}",
                f"{' and '.join(batching)} on while {BATCH_INDEX}=false: a batched entry is deleted only when every "
                "record in it is, and once batching is off a coordinator's cursor left inside a batched ledger "
                "never moves (docs/downgrade.md, the batch-index deletion caveat)",
                [evidence(where, **{k: runtime.get(k) for k in (*batching, BATCH_INDEX)})],
                [fix] if fix else [],
                f"set {BATCH_INDEX}=true in every broker.conf and restart the brokers",
            )
        )
    return out


def _disagreements(runtimes: dict) -> list[Finding]:
    if len(runtimes) < 2:
        return []
    out = []
    for key in SHARED:
        values = {url: runtime.get(key) for url, runtime in runtimes.items() if key in runtime}
        if len(set(map(str, values.values()))) > 1:
            listed = ", ".join(f"{url}: {value}" for url, value in values.items())
            out.append(
                Finding(
                    "config",
                    WARNING,
                    "brokers",
                    f"the brokers disagree on {key} ({listed}): a coordinator or topic behaves differently "
                    "depending on which broker loads it",
                    [evidence(RUNTIME.format("{broker}"), **{"setting": key, "values": values})],
                    [],
                    f"give {key} one value in every broker.conf (a dynamic setting: pulsar-admin brokers "
                    "update-dynamic-config sets it on all) and restart or unload what it applies to",
                )
            )
    return out
