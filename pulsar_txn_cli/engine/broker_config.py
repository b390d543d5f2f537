"""Broker configuration with Pulsar's key names, defaults, dynamic flags and validator rules.

Two layers, as on a broker: the static broker.conf values (`config` table, edited by
`engine config set` for non-dynamic keys) and dynamic overrides stored apart, like the
metadata-store overrides that `pulsar-admin brokers update-dynamic-config` writes. The runtime
value of a key is the override if any, else broker.conf, else the default. A store reads the
configuration only when it is (re)opened, which is when a change reaches it.
"""

from __future__ import annotations

from dataclasses import dataclass

from pulsar_txn_cli.engine.buffer.settings import DEFAULTS as BUFFER_DEFAULTS, DOCS as BUFFER_DOCS
from pulsar_txn_cli.errors import UsageError
from pulsar_txn_cli.names import parse_bool


@dataclass(frozen=True)
class Key:
    name: str
    type: type
    default: object
    dynamic: bool
    doc: str


def _k(name, type_, default, dynamic, doc):
    return Key(name, type_, default, dynamic, doc)


KEYS: dict[str, Key] = {
    k.name: k
    for k in [
        _k(
            "transactionCoordinatorEnabled",
            bool,
            False,
            False,
            "Enable transactions (the engine's broker.conf sets it to true at init).",
        ),
        _k("transactionLogBatchedWriteEnabled", bool, False, True, "Batch TC-log records (PIP-160)."),
        _k(
            "transactionLogBatchedWriteMaxRecords",
            int,
            512,
            False,
            "TC log: flush when this many records are buffered.",
        ),
        _k(
            "transactionLogBatchedWriteMaxSize", int, 4194304, False, "TC log: flush when this many bytes are buffered."
        ),
        _k("transactionLogBatchedWriteMaxDelayInMillis", int, 1, False, "TC log: flush timer period in ms."),
        _k("transactionPendingAckBatchedWriteEnabled", bool, False, True, "Batch pending-ack records (PIP-160)."),
        _k(
            "transactionPendingAckBatchedWriteMaxRecords",
            int,
            512,
            False,
            "Pending ack: flush when this many records are buffered.",
        ),
        _k(
            "transactionPendingAckBatchedWriteMaxSize",
            int,
            4194304,
            False,
            "Pending ack: flush when this many bytes are buffered.",
        ),
        _k(
            "transactionPendingAckBatchedWriteMaxDelayInMillis", int, 1, False, "Pending ack: flush timer period in ms."
        ),
        _k(
            "transactionPendingAckLogIndexMinLag",
            int,
            500,
            False,
            "Minimum records between two pending-ack log index points.",
        ),
        _k(
            "acknowledgmentAtBatchIndexLevelEnabled",
            bool,
            False,
            False,
            "Batch-index-level deletion on managed ledgers.",
        ),
        _k("managedLedgerMaxEntriesPerLedger", int, 50000, False, "Roll the ledger after this many entries."),
        _k("managedLedgerMaxSizePerLedgerMbytes", int, 2048, False, "Roll the ledger after this many MB."),
        _k(
            "managedLedgerMinLedgerRolloverTimeMinutes",
            int,
            10,
            False,
            "A ledger is never rolled by size or count before this age.",
        ),
        _k(
            "managedLedgerMaxLedgerRolloverTimeMinutes",
            int,
            240,
            False,
            "A ledger is rolled at this age even when not full.",
        ),
        _k("clusterName", str, "standalone", False, "The cluster name (label `cluster` of the metrics)."),
        _k("advertisedAddress", str, "localhost", False, "The broker's advertised address (label `broker`)."),
        _k("webServicePort", int, 8080, False, "The broker's web service port."),
        _k("brokerServicePort", int, 6650, False, "The broker's binary protocol port."),
        # the transaction buffer's settings (PIP-178), declared by its package; none is dynamic
        *(_k(name, type(default), default, False, BUFFER_DOCS[name]) for name, default in BUFFER_DEFAULTS.items()),
    ]
}

BATCH_GROUPS = {
    "transactionLogBatchedWriteEnabled": "transactionLogBatchedWrite",
    "transactionPendingAckBatchedWriteEnabled": "transactionPendingAckBatchedWrite",
}


def parse_value(name: str, text) -> object:
    """The typed value of a key from its text; raises ValueError when the text does not fit."""
    key = KEYS[name]
    if isinstance(text, key.type) and not (key.type is int and isinstance(text, bool)):
        return text
    text = str(text).strip()
    if key.type is bool:
        flag = parse_bool(text)
        if flag is not None:
            return flag
        raise ValueError(f"{name} takes true or false, not {text!r}")
    if key.type is int:
        try:
            return int(text)
        except ValueError:
            raise ValueError(f"{name} takes an integer, not {text!r}") from None
    return text


def to_text(value) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


BATCH_MINIMUMS = {"MaxRecords": 10, "MaxSize": 131072, "MaxDelayInMillis": 1}
_PORTS = ("webServicePort", "brokerServicePort")


def _too_small(name: str, value, minimum: int) -> ValueError:
    # Pulsar's TransactionBatchedWriteValidator's own wording: it names the field at fault.
    return ValueError(f"Configuration field '{name}' value must be greater than or equal to {minimum}, not {value}")


def validate(name: str, value, values: dict) -> None:
    """The rules for setting one key to value, given the other keys' values (raises ValueError).

    A broker checks batch-log settings only while their switch is on, so a bad value set while it
    is off waits to break the next enable. Here a batch-log setting is checked whenever it is set,
    a switch turned on checks its group, and other keys' stored values never block this one.
    """
    if isinstance(value, int) and not isinstance(value, bool) and name not in _PORTS and value < 0:
        raise ValueError(f"Configuration field '{name}' must not be negative")
    for flag, prefix in BATCH_GROUPS.items():
        minimum = BATCH_MINIMUMS.get(name.removeprefix(prefix)) if name.startswith(prefix) else None
        if minimum is not None and value < minimum:
            raise _too_small(name, value, minimum)
        if name == flag and value is True:
            for suffix, minimum in BATCH_MINIMUMS.items():
                if values[prefix + suffix] < minimum:
                    raise _too_small(prefix + suffix, values[prefix + suffix], minimum)


class Config:
    """The broker configuration of one engine (static layer + dynamic overrides)."""

    def __init__(self, store):
        self.store = store
        self._values: dict | None = None  # values(), read again after any write through this object

    def static(self) -> dict[str, str]:
        return dict(self.store.db.execute("SELECT key, value FROM config").fetchall())

    def overrides(self) -> dict[str, str]:
        """What GET of the dynamic configuration's values (protocol.BROKER_CONFIG/values) returns."""
        return dict(self.store.db.execute("SELECT key, value FROM dynamic_config ORDER BY key").fetchall())

    def values(self) -> dict[str, object]:
        """The runtime value of every key (typed). Kept between calls (every request asks whether the
        coordinator is enabled); writes through this object drop it. A copy: callers may change it."""
        if self._values is None:
            self._values = self._read()
        return dict(self._values)

    def _read(self) -> dict[str, object]:
        out = {name: key.default for name, key in KEYS.items()}
        for layer in (self.static(), self.overrides()):
            for name, text in layer.items():
                if name in KEYS:
                    try:
                        out[name] = parse_value(name, text)
                    except ValueError:
                        pass  # an unparsable stored value keeps the lower layer (as Pulsar ignores it)
        return out

    def get(self, name: str):
        self.require(name)
        return self.values()[name]

    def setting(self, name: str, default=None):
        """The runtime value of a key, or default for a name that is not a key (a component's lookup)."""
        return self.values().get(name, default)

    def runtime(self) -> dict[str, str]:
        """What GET of the runtime configuration (protocol.BROKER_RUNTIME) returns (all keys, as strings)."""
        return {name: to_text(value) for name, value in sorted(self.values().items())}

    def source(self, name: str) -> str:
        if name in self.overrides():
            return "dynamic"
        if name in self.static():
            return "broker.conf"
        return "default"

    @staticmethod
    def require(name: str) -> Key:
        if name not in KEYS:
            raise UsageError(
                f"unknown broker configuration key {name!r}; `pulsar-txn engine config list` shows the known keys"
            )
        return KEYS[name]

    def set(self, name: str, text, *, dynamic: bool | None = None) -> str:
        """Set a key: dynamic keys become overrides, others go to broker.conf. Returns the layer."""
        key = self.require(name)
        self._values = None  # validate against what is stored now
        layer = "dynamic" if (key.dynamic if dynamic is None else dynamic) else "static"
        if layer == "dynamic" and not key.dynamic:
            raise UsageError(f"Can't update non-dynamic configuration {name}")
        try:
            value = parse_value(name, text)
            validate(name, value, self.values())
        except ValueError as exc:
            raise UsageError(f"invalid value for {name}: {exc}") from None
        table = "dynamic_config" if layer == "dynamic" else "config"
        try:
            with self.store.tx():
                self.store.db.execute(
                    f"INSERT INTO {table}(key, value) VALUES(?, ?) ON CONFLICT(key) DO UPDATE SET value=excluded.value",
                    (name, to_text(value)),
                )
        finally:
            self._values = None
        return layer

    def store_override(self, name: str, text: str) -> None:
        """What POST of a dynamic setting (protocol.BROKER_CONFIG/NAME/VALUE) does: store the override as given."""
        try:
            with self.store.tx():
                self.store.db.execute(
                    "INSERT INTO dynamic_config(key, value) VALUES(?, ?) ON CONFLICT(key) DO UPDATE SET value=excluded.value",
                    (name, text),
                )
        finally:
            self._values = None

    def delete_override(self, name: str) -> bool:
        self.require(name)
        try:
            with self.store.tx():
                cur = self.store.db.execute("DELETE FROM dynamic_config WHERE key=?", (name,))
        finally:
            self._values = None
        return cur.rowcount > 0
