"""output/units.py: the one module of times and durations; each format is pinned to the text its
callers showed before it moved there (a change here changes tables, messages and records)."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from pulsar_txn_cli.errors import UsageError
from pulsar_txn_cli.output import units

MOMENT_MS = 1_777_629_600_123  # 2026-05-01T10:00:00.123Z


def test_each_time_format_keeps_its_text():
    assert units.iso_millis(MOMENT_MS) == "2026-05-01T10:00:00.123Z"
    assert units.iso_millis(None) == units.iso_millis(0) == "-"
    assert units.iso_seconds(MOMENT_MS) == "2026-05-01T10:00:00Z"
    assert units.spaced_seconds(MOMENT_MS) == "2026-05-01 10:00:00Z"
    assert units.spaced_utc(datetime(2026, 5, 1, 10, 0, 0, tzinfo=timezone.utc)) == "2026-05-01 10:00:00 UTC"
    assert units.spaced_utc().endswith(" UTC")


def test_durations_are_shown_in_their_two_largest_units():
    assert [units.duration(ms) for ms in (None, 500, 45_000, 125_000, 5_400_000, 273_600_000)] == [
        "?",
        "500ms",
        "45s",
        "2m5s",
        "1h30m",
        "3d4h",
    ]


def test_typed_durations_and_times_parse_or_say_what_is_wrong():
    assert units.parse_duration_ms("500ms") == 500 and units.parse_duration_ms("10") == 10_000
    assert units.parse_duration_ms("1.5m") == 90_000
    with pytest.raises(UsageError, match="--time '5 parsecs' is not a duration"):
        units.parse_duration_ms("5 parsecs")
    assert units.parse_time_ms("2026-05-01T10:00:00.123Z", "--at") == MOMENT_MS
    assert units.parse_time_ms("2026-05-01T10:00:00.123", "--at") == MOMENT_MS  # UTC unless it says otherwise
    assert units.parse_time_ms(str(MOMENT_MS), "--at") == MOMENT_MS
    with pytest.raises(UsageError, match="--changed-at 'yesterday' is not a time"):
        units.parse_time_ms("yesterday", "--changed-at")
