"""What is configured: the dynamic override, each broker's runtime value, and the rule that makes one
value of them (configured_value, the one place it is written; downgrade/effective.py uses it too)."""

from __future__ import annotations

from pulsar_txn_cli.admin import features
from pulsar_txn_cli.batchlog.logs import Log
from pulsar_txn_cli.admin.client import broker_at
from pulsar_txn_cli.errors import ConnectionFailed
from pulsar_txn_cli.names import parse_bool


def dynamic_value(values: dict | None, key: str) -> bool | None:
    """The dynamic override of KEY in GET .../brokers/configuration/values, or None when none is set."""
    return parse_bool((values or {}).get(key))


def configured_value(dynamic: bool | None, runtimes) -> bool | None:
    """The configured value: the dynamic override if set, else the brokers' runtime value when every
    broker that tells has the same one; None when they disagree or none tells."""
    if dynamic is not None:
        return dynamic
    values = {value for value in runtimes if value is not None}
    return values.pop() if len(values) == 1 else None


def configured_setting(admin, log: Log) -> dict:
    """{"dynamic": bool|None, "brokers": [{"broker", "version", "runtime"}], "configured": bool|None, "mixed": bool}.

    A broker older than PIP-160 has no batch setting at all: its runtime value is False (it cannot batch)."""
    dynamic = dynamic_value(admin.dynamic_config_values(), log.key)
    brokers = []
    urls = admin.broker_web_urls()
    for url in urls:
        at = broker_at(url, len(urls))
        config = admin.runtime_config(at)
        version = _version(admin, at)
        brokers.append({"broker": url, "version": version, "runtime": features.batch_flag(config, log.key, version)})
    return {
        "dynamic": dynamic,
        "brokers": brokers,
        "configured": configured_value(dynamic, (b["runtime"] for b in brokers)),
        "mixed": len({b["runtime"] for b in brokers}) > 1,
    }


def _version(admin, broker_url: str | None) -> str | None:
    try:
        return admin.version(broker_url) or None
    except ConnectionFailed:
        return None


def without_batched_logs(setting: dict) -> list[dict]:
    """The brokers whose release predates PIP-160 (they cannot read or write batched entries)."""
    return [b for b in setting["brokers"] if features.lacks_batched_logs(b.get("version"))]


def cannot_batch(setting: dict) -> str | None:
    """The release when every broker predates PIP-160 (then no store batches), else None."""
    return features.all_predate_batched_logs([b.get("version") for b in setting["brokers"]])


def configured_for(store: dict, setting: dict) -> bool | None:
    """The value this store's broker runs with: without a dynamic override, brokers may differ
    (each reads its own broker.conf), and a coordinator runs with its owner's."""
    if setting["dynamic"] is not None or not setting["mixed"] or not store.get("broker"):
        return setting["configured"]
    owner = _address(store["broker"])
    return next((b["runtime"] for b in setting["brokers"] if _address(b["broker"]) == owner), None)


def _address(url: str) -> str:
    """host:port of a broker's web URL (a lookup may name it with the other scheme, or a trailing slash)."""
    return str(url).split("://", 1)[-1].rstrip("/")
