"""What the transaction buffer needs from a topic's managed ledger, and an in-memory one.

`TopicLog` is the narrow interface the buffer is written against; `engine/buffer/ledgers.py`
adapts the engine's managed ledgers to it. `MemoryLog` is a small stand-in with ledger
rollover and trimming so the buffer's rules can be tested without any storage.
"""

from __future__ import annotations

from typing import Iterator, Protocol

from pulsar_txn_cli.names import Position


class TopicLog(Protocol):
    name: str

    def append(self, data: bytes) -> Position: ...

    def last_confirmed(self) -> Position:
        """The last written position; (currentLedger, -1) when nothing is written yet."""

    def previous_position(self, position: Position) -> Position:
        """The position just before `position`, across ledger boundaries (getPreviousPosition)."""

    def ledger_exists(self, ledger_id: int) -> bool: ...

    def read_after(self, position: Position) -> Iterator[tuple[Position, bytes]]:
        """Every entry after `position` still stored, in order."""

    def read(self, position: Position) -> bytes | None: ...

    def ledger_entries(self) -> list[tuple[int, int]]:
        """(ledgerId, number of entries) of every ledger still stored, oldest first."""


class MemoryLog:
    """An in-memory managed ledger: ledgers of `max_entries` entries, trimmed by ledger."""

    _next_ledger = [1]  # ledger ids are unique across logs, like BookKeeper's

    def __init__(self, name: str, max_entries: int = 1000):
        self.name = name
        self.max_entries = max_entries
        self.ledgers: dict[int, list[bytes]] = {}
        self._roll()

    def _roll(self) -> None:
        ledger_id = MemoryLog._next_ledger[0]
        MemoryLog._next_ledger[0] += 1
        self.ledgers[ledger_id] = []
        self.current = ledger_id

    def append(self, data: bytes) -> Position:
        if len(self.ledgers[self.current]) >= self.max_entries:
            self._roll()
        entries = self.ledgers[self.current]
        entries.append(data)
        return Position(self.current, len(entries) - 1)

    def last_confirmed(self) -> Position:
        for ledger_id in reversed(list(self.ledgers)):
            if self.ledgers[ledger_id]:
                return Position(ledger_id, len(self.ledgers[ledger_id]) - 1)
        return Position(self.current, -1)

    def previous_position(self, position: Position) -> Position:
        if position.entry > 0:
            return Position(position.ledger, position.entry - 1)
        earlier = [lid for lid in self.ledgers if lid < position.ledger and self.ledgers[lid]]
        if earlier:
            return Position(earlier[-1], len(self.ledgers[earlier[-1]]) - 1)
        return Position(position.ledger, -1)

    def ledger_exists(self, ledger_id: int) -> bool:
        return ledger_id in self.ledgers

    def read_after(self, position: Position) -> Iterator[tuple[Position, bytes]]:
        for ledger_id, entries in list(self.ledgers.items()):
            if ledger_id < position.ledger:
                continue
            start = position.entry + 1 if ledger_id == position.ledger else 0
            for entry_id in range(max(start, 0), len(entries)):
                yield Position(ledger_id, entry_id), entries[entry_id]

    def read(self, position: Position) -> bytes | None:
        entries = self.ledgers.get(position.ledger)
        if entries is None or not 0 <= position.entry < len(entries):
            return None
        return entries[position.entry]

    def ledger_entries(self) -> list[tuple[int, int]]:
        return [(lid, len(entries)) for lid, entries in self.ledgers.items()]

    def trim_before(self, ledger_id: int) -> list[int]:
        """Delete every ledger older than `ledger_id` (what retention does); returns their ids."""
        gone = [lid for lid in self.ledgers if lid < ledger_id and lid != self.current]
        for lid in gone:
            del self.ledgers[lid]
        return gone

    def drop(self, position: Position) -> None:
        """Lose one entry (tests: a segment that disappeared)."""
        self.ledgers[position.ledger][position.entry] = None
