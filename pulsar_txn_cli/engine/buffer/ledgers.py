"""The engine's managed ledgers (engine/ledger.py) behind the buffer's TopicLog interface.

Each append is its own store transaction, as each BookKeeper add is durable on its own: a
segment can be stored while the index written after it is not (PIP-178's interrupted write).
A caller that wants several writes atomic wraps them in its own `store.tx()`.
"""

from __future__ import annotations

from typing import Iterator

from pulsar_txn_cli.names import Position


class ManagedLedgerLog:
    def __init__(self, ml, settings: dict | None = None):
        self.ml = ml
        self.name = ml.name
        self.settings = settings or {}

    @property
    def store(self):
        return self.ml.store

    def append(self, data: bytes) -> Position:
        with self.store.tx():
            if self.ml.current is None:  # first write ever: the broker opens the ledger on topic load
                self.ml.open_new_ledger(self.settings)
            ledger_id, entry_id = self.ml.add_entries([data])[0]
        return Position(ledger_id, entry_id)

    def last_confirmed(self) -> Position:
        return Position(*self.ml.last_confirmed())

    def previous_position(self, position: Position) -> Position:
        if position.entry > 0:
            return Position(position.ledger, position.entry - 1)
        earlier = [l for l in self.ml.ledgers if l.ledger_id < position.ledger and l.entries]
        if earlier:
            return Position(earlier[-1].ledger_id, earlier[-1].entries - 1)
        return Position(position.ledger, -1)

    def ledger_exists(self, ledger_id: int) -> bool:
        return any(l.ledger_id == ledger_id for l in self.ml.ledgers)

    def read_after(self, position: Position) -> Iterator[tuple[Position, bytes]]:
        for ledger_id, entry_id, data in list(self.ml.read_after(tuple(position))):
            yield Position(ledger_id, entry_id), bytes(data)

    def read(self, position: Position) -> bytes | None:
        for ledger_id, entry_id, data in self.ml.read_after((position.ledger, position.entry - 1)):
            return bytes(data) if (ledger_id, entry_id) == tuple(position) else None
        return None

    def ledger_entries(self) -> list[tuple[int, int]]:
        return [(l.ledger_id, l.entries) for l in self.ml.ledgers]

    def internal_stats(self, metadata: bool = False) -> dict:
        return self.ml.internal_stats(metadata)
