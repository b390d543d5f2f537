"""Pulsar's names and ids as text: topics, partitions, managed ledgers, positions, transaction ids,
and the "true"/"false" of its configuration. One parser each.

A leaf: it imports only protocol.py, so any layer can use it. A name that does not parse
raises InvalidName, which the CLI's error mapping (cli/main.py) reports as a usage error (exit code 2).
"""

from __future__ import annotations

import functools
import re
from typing import NamedTuple
from urllib.parse import quote

from pulsar_txn_cli.protocol import PENDING_ACK_SUFFIX

PARTITION_SUFFIX = "-partition-"
_PARTITION = re.compile(r"-partition-\d+$")
_TXN = re.compile(r"^\(?\s*(-?\d+)\s*[,:]\s*(-?\d+)\s*\)?$")


class InvalidName(ValueError):
    """A topic name, position or transaction id that does not parse; str() is the sentence to show."""


# ---------------------------------------------------------------- topics


class TopicName:
    """A persistent topic name from any of Pulsar's forms, split the way its REST paths need it."""

    def __init__(self, name: str):
        text = str(name).strip()
        domain = "persistent"
        if "://" in text:
            domain, _, text = text.partition("://")
        parts = text.split("/")
        if len(parts) == 1:
            parts = ["public", "default", parts[0]]
        if len(parts) != 3 or not all(parts):
            raise InvalidName(
                f"topic {name!r} is not a topic name (persistent://tenant/namespace/topic, tenant/namespace/topic or topic)"
            )
        if domain != "persistent":
            raise InvalidName(f"topic {name!r} is {domain}; transactions exist only on persistent topics")
        self.tenant, self.namespace, self.local = parts

    @property
    def full(self) -> str:
        return f"persistent://{self.tenant}/{self.namespace}/{self.local}"

    @property
    def rest(self) -> str:
        return f"{self.tenant}/{self.namespace}/{quote(self.local, safe='')}"

    @property
    def managed_ledger(self) -> str:
        """Pulsar's managed-ledger name of the topic: tenant/ns/persistent/local."""
        return f"{self.tenant}/{self.namespace}/persistent/{self.local}"

    def __str__(self) -> str:
        return self.full


@functools.lru_cache(maxsize=4096)
def full_topic(name: str) -> str:
    """persistent://tenant/ns/topic from any of Pulsar's short forms (cached: the engine asks per message)."""
    return TopicName(name).full


def namespace_of(topic: str) -> str:
    name = TopicName(topic)
    return f"{name.tenant}/{name.namespace}"


def managed_ledger_name(topic: str) -> str:
    """persistent://tenant/ns/local -> tenant/ns/persistent/local (Pulsar's managed-ledger name)."""
    return TopicName(topic).managed_ledger


def topic_of_managed_ledger(name: str) -> str | None:
    """tenant/ns/persistent/local -> persistent://tenant/ns/local; None for another kind of ledger."""
    parts = name.split("/", 3)
    if len(parts) != 4 or parts[2] != "persistent":
        return None
    return f"persistent://{parts[0]}/{parts[1]}/{parts[3]}"


def pending_ack_managed_ledger(topic: str, subscription: str) -> str:
    """The managed ledger of a subscription's pending-ack store."""
    return f"{TopicName(topic).managed_ledger}-{subscription}{PENDING_ACK_SUFFIX}"


def expand_partitions(topic: str, count: int) -> list[str]:
    """The partitions of a topic with `count` partitions; a non-partitioned topic (0) is itself."""
    return [f"{topic}{PARTITION_SUFFIX}{i}" for i in range(count)] if count > 0 else [topic]


def partitioned_topic(name: str) -> str:
    """The partitioned topic a partition belongs to (a name without a partition suffix is itself)."""
    return _PARTITION.sub("", name)


# ---------------------------------------------------------------- positions and transaction ids


class Position(NamedTuple):
    """A managed-ledger position; tuples order the way PositionImpl.compareTo does."""

    ledger: int
    entry: int

    def __str__(self) -> str:
        return f"{self.ledger}:{self.entry}"

    @classmethod
    def find(cls, text) -> "Position | None":
        """'12:34' -> Position(12, 34); anything else (None, '', 'x:1') -> None."""
        if not isinstance(text, str):
            return None
        ledger, sep, entry = text.partition(":")
        try:
            return cls(int(ledger), int(entry)) if sep else None
        except ValueError:
            return None


EARLIEST = Position(-1, -1)


class TxnID(NamedTuple):
    most: int  # the transaction coordinator id
    least: int  # the coordinator's sequence number

    def __str__(self) -> str:
        return f"({self.most},{self.least})"

    @classmethod
    def parse(cls, text: str) -> "TxnID":
        """(most,least), with or without the parentheses; a colon also separates them."""
        match = _TXN.match(str(text).strip())
        if not match:
            raise InvalidName(f"transaction id {text!r} is not (most,least), e.g. (1,18)")
        return cls(int(match.group(1)), int(match.group(2)))

    @classmethod
    def of(cls, value) -> "TxnID":
        """A TxnID from a TxnID, its text "(most,least)" or a (most, least) pair."""
        if isinstance(value, cls):
            return value
        if isinstance(value, str):
            return cls.parse(value)
        most, least = value
        return cls(int(most), int(least))


# ---------------------------------------------------------------- configuration values


def parse_bool(value) -> bool | None:
    """A configuration value as Pulsar writes it: 'true'/'false' in any case (or a bool); else None."""
    if isinstance(value, bool):
        return value
    if value is None:
        return None
    text = str(value).strip().lower()
    return True if text == "true" else False if text == "false" else None


def across_brokers(flags: list[bool | None]) -> bool | None:
    """One boolean setting across the brokers, as risky as its riskiest broker: False if any has it off,
    True only if every one has it on, else None (unknown)."""
    if False in flags:
        return False
    return True if flags and all(f is True for f in flags) else None
