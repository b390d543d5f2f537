"""Positions ("ledgerId:entryId") and transaction ids ("(most,least)") as Pulsar prints them."""
from __future__ import annotations

import re
from typing import NamedTuple

from pulsar_txn_cli.errors import DataError


class Position(NamedTuple):
    """A managed-ledger position; tuples order the way PositionImpl.compareTo does."""

    ledger: int
    entry: int

    def __str__(self) -> str:
        return f"{self.ledger}:{self.entry}"

    @classmethod
    def parse(cls, text: str) -> "Position":
        try:
            ledger, entry = str(text).split(":")
            return cls(int(ledger), int(entry))
        except ValueError:
            raise DataError(f"{text!r} is not a position of the form ledgerId:entryId") from None


class TxnID(NamedTuple):
    most: int  # the transaction coordinator id
    least: int  # the coordinator's sequence number

    def __str__(self) -> str:
        return f"({self.most},{self.least})"

    @classmethod
    def parse(cls, text: str) -> "TxnID":
        match = re.fullmatch(r"\(?\s*(\d+)\s*,\s*(\d+)\s*\)?", str(text))
        if not match:
            raise DataError(f"{text!r} is not a transaction id of the form (most,least)")
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


EARLIEST = Position(-1, -1)
