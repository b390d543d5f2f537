"""Pulsar 5.0's second transaction coordinator (the scalable-topics one): what the tool cannot see of it.

A 5.0 broker runs it beside the classic coordinator, on by default (`transactionCoordinatorScalableTopicsEnabled`),
and keeps its transactions in the metadata store, not in a transaction log. Its transactions are out of the admin
API's reach (docs/real-broker-findings.md): `coordinators`, `coordinatorStats` and `slowTransactions` list only the
classic coordinators, `transactionMetadata` of one of its ids answers 404, and `abortTransaction` cannot end one.
Only the topics' transaction buffers count them, in `pulsar_txn_tb_active_total`. So wherever the tool answers from
the classic coordinators it says, in one sentence, what it left out and how many transactions the buffers count
that no classic coordinator lists, rather than an empty answer that reads as an all-clear.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pulsar_txn_cli.admin.writer_metrics import parse
from pulsar_txn_cli.errors import PulsarTxnError
from pulsar_txn_cli.names import parse_bool

SETTING = "transactionCoordinatorScalableTopicsEnabled"
BUFFER_ACTIVE = "pulsar_txn_tb_active_total"  # per topic: transactions its buffer has not seen end
NOT_COVERED = (
    "its transactions are kept in the metadata store and the admin API does not list, look up or abort them, "
    "so {what} leaves them out"
)


@dataclass
class SecondCoordinator:
    """Where the second coordinator is on, and what the buffers count beyond the classic coordinators."""

    brokers: list[str]  # the brokers with it on
    counted: dict[str, int] = field(default_factory=dict)  # topic -> transactions no classic coordinator lists
    error: str | None = None  # why the buffers' counts could not be read

    @property
    def total(self) -> int:
        return sum(self.counted.values())

    def sentence(self, what: str) -> str:
        """One line: that it is on, what `what` (a command) leaves out, and the buffers' count."""
        head = (
            f"Pulsar 5.0's scalable-topics transaction coordinator is on ({SETTING}) on "
            + ("this broker" if len(self.brokers) == 1 else f"{len(self.brokers)} brokers")
            + "; "
            + NOT_COVERED.format(what=what)
        )
        if self.error:
            return f"{head}, and how many there are is unknown: {self.error}"
        if not self.counted:
            return f"{head}; the transaction buffers count no open transaction beyond the classic coordinators' ({BUFFER_ACTIVE})"
        shown = ", ".join(f"{topic} {n}" for topic, n in sorted(self.counted.items())[:3])
        more = f" and {len(self.counted) - 3} more topic(s)" if len(self.counted) > 3 else ""
        return (
            f"{head}: the transaction buffers count {self.total} open transaction(s) on {len(self.counted)} topic(s) "
            f"that no classic coordinator lists ({BUFFER_ACTIVE}: {shown}{more})"
        )

    def to_json(self) -> dict:
        return {
            "setting": SETTING,
            "brokers": self.brokers,
            "uncoveredTransactionsCounted": None if self.error else self.total,
            "byTopic": dict(sorted(self.counted.items())),
            "error": self.error,
        }


def detect(admin, classic: dict | None) -> SecondCoordinator | None:
    """The second coordinator where the target's brokers have it on, else None (a broker before 5.0 has no
    such setting; the broker behind the admin URL is asked first, and only where it has it on the others). `classic`: the classic coordinators' open transactions (txn id -> TransactionMetadata) when
    the caller has them, else None: they are listed here. A broker that cannot be read is skipped: a check
    of settings must not fail the command it speaks for."""
    if not _enabled(admin, None, 1):
        return None  # one request where the broker behind the admin URL has it off (every line before 5.0)
    urls = _brokers(admin)
    on = [url for url in urls if len(urls) == 1 or _enabled(admin, url, len(urls))]
    if not on:
        return None
    found = SecondCoordinator(on)
    try:
        buffers = buffer_counts(admin, urls)
        if classic is None:
            from pulsar_txn_cli.admin.open_transactions import open_transactions

            classic = open_transactions(admin).transactions
    except PulsarTxnError as exc:
        found.error = str(exc)
        return found
    found.counted = beyond_classic(buffers, classic)
    return found


def buffer_counts(admin, urls: list[str]) -> dict[str, int]:
    """topic -> the transactions its buffer counts open, summed over the brokers' /metrics pages."""
    from pulsar_txn_cli.admin.client import broker_at

    counts: dict[str, int] = {}
    for url in urls:
        for _, labels, value in parse(admin.metrics_text(broker_at(url, len(urls))), only=BUFFER_ACTIVE):
            topic = labels.get("topic")
            if topic and value > 0:
                counts[topic] = counts.get(topic, 0) + int(value)
    return counts


def beyond_classic(buffers: dict[str, int], classic: dict) -> dict[str, int]:
    """Per topic, what its buffer counts beyond the classic coordinators' open transactions that produced to it."""
    listed: dict[str, int] = {}
    for meta in classic.values():
        for partition in (meta or {}).get("producedPartitions") or {}:
            listed[partition] = listed.get(partition, 0) + 1
    out = {topic: n - listed.get(topic, 0) for topic, n in buffers.items()}
    return {topic: n for topic, n in out.items() if n > 0}


def _brokers(admin) -> list[str]:
    try:
        return admin.broker_web_urls() or [None]
    except PulsarTxnError:
        return [None]  # the admin URL's own broker


def _enabled(admin, url: str | None, brokers: int) -> bool:
    from pulsar_txn_cli.admin.client import broker_at

    try:
        runtime = admin.runtime_config(broker_at(url, brokers) if url else None) or {}
    except PulsarTxnError:
        return False
    return bool(parse_bool(runtime.get(SETTING)))
