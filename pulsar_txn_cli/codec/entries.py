"""Entries as read from an input (RawEntry: bytes and where they came from) and as decoded (DecodedEntry)."""

from __future__ import annotations

from dataclasses import dataclass, field

from pulsar_txn_cli.errors import DecodeError


@dataclass(slots=True)
class RawEntry:
    data: bytes | None
    index: int  # 0-based position in the input
    ledger_id: int | None = None
    entry_id: int | None = None
    managed_ledger: str | None = None
    error: DecodeError | None = None
    source: str | None = None
    warnings: list[str] = field(default_factory=list)

    @property
    def where(self) -> str:
        if self.ledger_id is not None and self.entry_id is not None:
            return f"{self.ledger_id}:{self.entry_id}"
        prefix = f"{self.source} " if self.source else ""
        return f"{prefix}#{self.index + 1}"


@dataclass(slots=True)
class DecodedEntry:
    """One BookKeeper entry of a transaction log, decoded."""

    log: str
    batched: bool
    version: int | None
    size: int
    records: list = field(default_factory=list)  # protobuf messages, in batch-index order
    warnings: list[str] = field(default_factory=list)
    ledger_id: int | None = None
    entry_id: int | None = None
    managed_ledger: str | None = None
    where: str | None = None  # how messages name it: "ledger:entry" or "source #n"
    data: bytes | None = None  # the entry's bytes, for the native renderer (records.entry_to_json)
