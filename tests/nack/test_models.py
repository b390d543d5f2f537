"""The nack models: the pair map's resize rules, bucket arithmetic, redelivery error bounds, plan vs simulate."""

from __future__ import annotations

import pytest

from pulsar_txn_cli.errors import UsageError
from pulsar_txn_cli.nack import layout
from pulsar_txn_cli.nack.new_tracker import NewTracker, bucket_of
from pulsar_txn_cli.nack.old_tracker import OldTracker
from pulsar_txn_cli.nack.pair_map import LongLongPairHashMap
from pulsar_txn_cli.nack.plan import Workload, parse_size, plan, slots_for
from pulsar_txn_cli.nack.simulate import SimWorkload, simulate


def test_pair_map_doubles_past_the_fill_factor_and_halves_under_the_idle_factor():
    m = LongLongPairHashMap()
    assert m.capacities() == [512]  # 256 expected items / 0.66 -> 387 -> 512
    for e in range(int(512 * 0.66)):  # 337 fit in 512 slots
        m.put(1, e, 0, e)
    assert m.capacities() == [512]
    m.put(1, 10_000, 0, 0)
    assert m.capacities() == [1024]
    for e in range(185):
        m.remove(1, e)
    assert len(m) == 153 and m.capacities() == [1024]  # not under int(1024 * 0.15) = 153 yet
    m.remove(1, 185)
    assert m.capacities() == [512]  # halved: 152 live entries fit under 512's fill threshold
    for e in range(186, 337):
        m.remove(1, e)
    assert len(m) == 1 and m.capacities() == [512]  # never below the initial capacity


def test_pair_map_replaces_a_value_and_finds_keys_after_rehash():
    m = LongLongPairHashMap()
    for e in range(5000):
        assert m.put(3, e, 0, e)
    assert not m.put(3, 42, 0, 7)
    values = {(k1, k2): v2 for k1, k2, _, v2 in m.items()}
    assert len(values) == 5000 and values[(3, 42)] == 7
    assert m.capacities() == [slots_for(5000)] == [8192]


def test_bucket_clears_the_low_bits():
    assert bucket_of(0b1001, 1) == 0b1000
    assert bucket_of(1_000_255, 8) == 1_000_192
    assert bucket_of(12345, 0) == 12345


def test_new_design_is_early_by_less_than_a_bucket_and_never_late_with_one_delay():
    result = simulate(SimWorkload(2000, (7000,), 20, bits=8, samples=3))
    after, before = result["error"]["after"], result["error"]["before"]
    assert after["late"] == 0 and -256 < after["minMs"] <= after["maxMs"] <= 0
    assert before["early"] == 0 and 0 <= before["maxMs"] < 7000 / 3 + 1  # late by up to the timer interval
    assert result["timer"]["after"]["runs"] > result["timer"]["before"]["runs"]


def test_batch_problem_is_fixed_in_the_pips_order_and_the_timer_quirk_shows_in_the_other():
    rows = {(r["order"], r["design"]): r for r in simulate(SimWorkload(100, (1000,), 1, samples=1))["batchProblem"]}
    assert rows[("10s then 20s", "before")]["msg10sLateMs"] == 10_000  # the second nack overwrote the first
    assert rows[("10s then 20s", "after")]["msg10sLateMs"] == 0
    assert rows[("10s then 20s", "after")]["entryRedeliveredAtMs"] == [10_000, bucket_of(20_000, 8)]
    # a shorter nack does not move a pending timer (the Java client's add() schedules only when none is)
    assert rows[("20s then 10s", "after")]["firstTimerMs"] == 20_000


def test_plan_matches_the_pips_old_design_figures():
    result = plan(Workload(10_000, 3600, 8))
    assert result["entries"] == 36_000_000
    at = result["before"]["atEntries"]
    assert at["slots"] == 2**26 and 53 <= at["bytesPerEntry"] < 60  # PIP: ~53 B/entry, 1.77 GB
    assert result["before"]["peakEntries"] == 48_000_000  # the timer runs every 20 min
    # the PIP's 1 M and 10 M measurements: 64 MB and 512 MB tables
    assert layout.pair_map_bytes([slots_for(1_000_000)]) // 2**20 == 64
    assert layout.pair_map_bytes([slots_for(10_000_000)]) // 2**20 == 512


def test_plan_new_design_approaches_the_pips_bitmap_bound_at_coarse_precision():
    per_entry = plan(Workload(10_000, 3600, 20))["after"]["bytesPerEntry"]
    assert 0.163 <= per_entry < 0.2  # PIP: 8 KB a 50,000-entry ledger, 0.163 B/entry, plus bucket overhead


def test_plan_and_simulate_agree_on_the_new_design():
    w = Workload(1000, 20, 8)
    planned = plan(w)["after"]
    simulated = simulate(SimWorkload(1000, (20_000,), 40, bits=8, samples=4))["memory"][-1]
    assert abs(simulated["afterBuckets"] - planned["buckets"]) <= 2
    assert simulated["afterBytes"] == pytest.approx(planned["bytes"], rel=0.05)


def test_old_tracker_memory_is_the_table_it_holds():
    tracker = OldTracker(10_000)
    for e in range(1000):
        tracker.add(0, 5, e, 10_000)
    assert tracker.java_bytes() == layout.pair_map_bytes([2048]) == 16 + 24 + 96 + 16 + 32 * 2048


def test_new_tracker_memory_counts_buckets_maps_and_bitmaps():
    tracker = NewTracker(bits=8)
    tracker.add(0, 5, 1, 1000)
    one = tracker.java_bytes()
    assert one == layout.AVL_MAP + layout.ROARING64_SHARED + layout.AVL_ENTRY + 496 + 232 + 48
    tracker.add(0, 5, 2, 1000)
    assert tracker.java_bytes() == one  # the same bucket, ledger and array container
    tracker.add(0, 5, 3, 5000)
    assert tracker.java_bytes() > one


@pytest.mark.parametrize(
    "text,expected",
    [("512MiB", 512 * 2**20), ("2GB", 2 * 10**9), ("1.5g", int(1.5 * 2**30)), ("800000", 800_000), ("64m", 64 * 2**20)],
)
def test_parse_size(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize("text", ["", "lots", "-1MB", "0", "5 parsecs"])
def test_parse_size_refuses(text):
    with pytest.raises(UsageError):
        parse_size(text)


def test_plan_and_simulate_agree_on_the_old_table_once_tombstones_settle():
    """Tombstones pile up over several delays before the table doubles; after 12 delays both agree."""
    planned = plan(Workload(5000, 2))["before"]
    memory = simulate(SimWorkload(5000, (2000,), 24, samples=12))["memory"]
    assert planned["slots"] == 2 * planned["slotsWithoutTombstones"]
    assert memory[-1]["beforeBytes"] == planned["bytes"]
    assert memory[3]["beforeBytes"] < planned["bytes"]  # not yet at 8 s (4 delays)
