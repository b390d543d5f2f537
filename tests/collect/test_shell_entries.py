"""collect's check of one ledger's shell output (collect/shell.py `entries`), on a real BookieShell dump
(tests/fixtures/real/tc_log_unbatched.txt: ledger 6, 96 entries, read from a real 4.0.7 bookie)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pulsar_txn_cli.collect.shell import ShellFailed, entries

DUMP = (Path(__file__).resolve().parents[1] / "fixtures" / "real" / "tc_log_unbatched.txt").read_text().splitlines()
LEDGER, COUNT = 6, 96


def _read(expected: int, is_open: bool) -> list[int]:
    return [entry_id for entry_id, _ in entries(DUMP, LEDGER, expected, is_open)]


def test_a_closed_ledger_must_give_exactly_the_brokers_count():
    assert _read(COUNT, is_open=False) == list(range(COUNT))
    for expected in (COUNT - 1, COUNT + 1):
        with pytest.raises(ShellFailed, match=f"the shell printed {COUNT} entries, the broker counts {expected}"):
            _read(expected, is_open=False)


def test_an_open_ledger_may_trail_the_broker_by_the_adds_in_flight_or_have_grown():
    # 2 behind was seen on a real broker (the bookies' LAC trails the adds in flight); collect reads it again
    # once closed, so no count of an open ledger fails it
    assert _read(COUNT + 2, is_open=True) == list(range(COUNT))
    assert _read(COUNT + 40, is_open=True) == list(range(COUNT))
    assert _read(COUNT - 5, is_open=True) == list(range(COUNT))


def test_a_missing_entry_id_fails_open_or_closed():
    start = next(i for i, line in enumerate(DUMP) if "Eid=3," in line)
    end = next(i for i, line in enumerate(DUMP) if "Eid=4," in line)
    gap = DUMP[:start] + DUMP[end:]  # entry 3's header and bytes gone
    for is_open in (True, False):
        with pytest.raises(ShellFailed, match="entry 4 came where entry 3 was due"):
            list(entries(gap, LEDGER, COUNT, is_open))
