"""The Python models against the Java client's own NegativeAcksTracker, measured with JOL.

The probe (tests/nack_java/probe, a Maven module) drives the real tracker of pulsar-client 4.0.1
(the pair map PIP-393 replaced) and 4.0.7 (PIP-393's buckets) with the same workloads and prints
the retained size of the tracker's map (JOL's GraphLayout.totalSize()) and its shape.

Tolerances, and why:
- old design: exact. The table's size follows from the resize rules alone, and the layout counts
  every field of the map, its section and the long[] table.
- new design, on the shape the Java tracker actually built: within 2%. The layout model counts
  fields and array growth (checked piecewise by the probe's `layout` mode); the residue, a few
  bytes a bucket that the model counts and JOL does not, stays under 1.1% in these workloads.
- old design under churn (the real timer task removing due entries as it runs): the table the
  real client settles on equals the plan's and the simulation's, give or take one doubling. The
  size is a power of two and depends on when the timer ran (real time, jittery), so a run that
  crosses the fill threshold one tick earlier or later is one doubling off; so far they matched.
- new design, plan's steady state vs the real tracker: within 10%. The probe nacks in a tight loop
  while the real clock runs (due = now + delay, and `now` moves a few % of the simulated span
  while adding), so the Java buckets are spread a little wider than the plan's ideal clock.
- new design under churn: the real peak within 1% of the model's, the model run on the real run's clock
  and measured when the probe measures (where in a 256 ms bucket a run starts moves the peak by up to 10%).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from pulsar_txn_cli.nack import layout
from pulsar_txn_cli.nack.new_tracker import NewTracker
from pulsar_txn_cli.nack.old_tracker import OldTracker
from pulsar_txn_cli.nack.pair_map import LongLongPairHashMap
from pulsar_txn_cli.nack.plan import Workload, new_design, slots_for
from pulsar_txn_cli.nack.plan import old_design as plan_old
from pulsar_txn_cli.nack.simulate import SimWorkload, simulate
from tests.conftest import missing_tool

pytestmark = pytest.mark.nack_java

PROBE = Path(__file__).parent / "probe"
# (rate/s, delay ms, precision bits, entries per ledger, batch, simulated ms of nacks)
WORKLOADS = [
    (10_000, 60_000, 8, 50_000, 1, 30_000),  # the PIP's rate: ~2,560 entries a bucket, array containers
    (200, 300_000, 0, 50_000, 1, 120_000),  # 1 ms buckets of one entry: the per-bucket overhead
    (20_000, 30_000, 12, 10_000, 10, 30_000),  # batches of 10, ledgers rolling, bitmap containers
]
CHURN = (20_000, 600, 4_000)  # rate/s, delay ms, real ms: the steady state, the tracker's own timer task removing
# The churn peak, real over the model on the same clock (measured: see test_new_design_under_churn).
LOW, HIGH = 0.99, 1.01


def _mvn(*args: str) -> None:
    base = ["mvn", "-q", "-B", "-s", str(PROBE / "settings.xml"), "-f", str(PROBE / "pom.xml"), *args]
    if subprocess.run([*base[:1], "-o", *base[1:]], capture_output=True, text=True).returncode == 0:
        return  # everything was in ~/.m2 already
    done = subprocess.run(base, capture_output=True, text=True, timeout=900)
    if done.returncode:
        pytest.fail(
            f"building the nack probe failed (mvn {' '.join(args)}):\n{done.stdout[-3000:]}{done.stderr[-2000:]}"
        )


@pytest.fixture(scope="module")
def measured() -> dict:
    missing = [tool for tool in ("java", "mvn") if not shutil.which(tool)]
    if missing:
        missing_tool(f"{' and '.join(missing)} {'are' if len(missing) > 1 else 'is'}")
    _mvn("-P", "new", "package")
    _mvn("-P", "old", "generate-sources")
    args = [a for w in WORKLOADS for a in ("workload", *map(str, w))] + ["order", "layout", "churn", *map(str, CHURN)]
    out = {}
    for design in ("old", "new"):
        classpath = f"{PROBE / 'target' / 'nack-probe.jar'}:{(PROBE / 'target' / f'classpath-{design}.txt').read_text().strip()}"
        done = subprocess.run(
            [
                "java",
                "-Xmx768m",
                "-Djdk.attach.allowAttachSelf=true",
                "-cp",
                classpath,
                "org.apache.pulsar.client.impl.NackProbe",
                *args,
            ],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
        assert len(lines) == len(WORKLOADS) + 3 and all(line["design"] == design for line in lines), done.stdout[:500]
        out[design] = lines
    return out


@pytest.mark.parametrize("index", range(len(WORKLOADS)))
def test_old_design_table_and_bytes_are_exact(measured, index):
    rate, _, _, _, batch, span = WORKLOADS[index]
    java = measured["old"][index]
    entries = rate * span // 1000 // batch
    assert java["entries"] == entries
    model = LongLongPairHashMap()
    for e in range(entries):
        model.put(1000, e, 0, e)
    assert model.capacities() == [java["capacity"]] == [slots_for(entries)]
    assert layout.pair_map_bytes(model.capacities()) == java["bytes"]


@pytest.mark.parametrize("index", range(len(WORKLOADS)))
def test_new_design_layout_on_the_real_shape(measured, index):
    java = measured["new"][index]
    model = (
        layout.AVL_MAP
        + layout.ROARING64_SHARED
        + sum(
            layout.AVL_ENTRY
            + layout.open_map_bytes(len(ledgers))
            + sum(layout.roaring64_bytes(chunks) for _, chunks in ledgers)
            for _, ledgers in java["buckets"]
        )
    )
    assert model == pytest.approx(java["bytes"], rel=0.02)
    held = sum(c for _, ledgers in java["buckets"] for _, chunks in ledgers for c in chunks)
    rate, _, _, _, batch, span = WORKLOADS[index]
    # a batch's nacks can straddle a bucket boundary: then its entry is in both buckets
    assert 0 <= held - rate * span // 1000 // batch <= (len(java["buckets"]) if batch > 1 else 0)


@pytest.mark.parametrize("index", range(len(WORKLOADS)))
def test_plan_holds_to_the_real_tracker(measured, index):
    rate, _, bits, per_ledger, batch, span = WORKLOADS[index]
    planned = new_design(Workload(rate, span / 1000, bits, per_ledger, batch))
    assert planned["bytes"] == pytest.approx(measured["new"][index]["bytes"], rel=0.10)
    real = len(measured["new"][index]["buckets"])
    assert abs(planned["buckets"] - real) <= max(1, 0.10 * real)  # the phase of the first bucket adds or takes one


def test_timer_scheduling_matches_the_models(measured):
    """Both clients' first timer for two nacks of one entry (10 s and 20 s) in both orders."""
    for design, make in (("old", lambda: OldTracker(10_000)), ("new", lambda: NewTracker(8))):
        java = measured[design][len(WORKLOADS)]
        for key, delays in (("shortFirst", (10_000, 20_000)), ("longFirst", (20_000, 10_000))):
            tracker = make()
            for delay in delays:
                tracker.add(0, 7, 3, delay)
            assert java[key] == [int(tracker.timer_at)], (design, key)


def test_layout_building_blocks(measured):
    blocks = measured["new"][len(WORKLOADS) + 1]
    for count, size in blocks["roaring64"].items():
        n = int(count)
        assert layout.ROARING64_SHARED + layout.roaring64_range_bytes(0, n) == size, count
    assert layout.open_map_bytes(0) == blocks["openMapEmpty"] and layout.open_map_bytes(25) == blocks["openMap25"]
    assert layout.AVL_MAP == blocks["avlEmpty"] and layout.AVL_MAP + 2 * layout.AVL_ENTRY == blocks["avlTwo"]
    assert blocks["avlTwoWithKeySet"] - blocks["avlTwo"] == layout.AVL_KEY_SET
    assert layout.pair_map_bytes([512]) == measured["old"][len(WORKLOADS) + 1]["pairMap256"]


def test_old_design_under_churn_keeps_tombstones_and_doubles(measured):
    """Tombstones count as used slots: the real table settles above what the live entries need."""
    rate, delay_ms, span_ms = CHURN
    java = measured["old"][len(WORKLOADS) + 2]["maxBytes"]
    planned = plan_old(Workload(rate, delay_ms / 1000))
    simulated = simulate(SimWorkload(rate, (delay_ms,), span_ms / 1000, samples=40))["peak"]["beforeBytes"]
    without_tombstones = layout.pair_map_bytes([planned["slotsWithoutTombstones"]])
    assert planned["bytes"] == simulated
    assert java in (
        planned["bytes"],
        2 * planned["bytes"] - layout.pair_map_bytes([0]),
        (planned["bytes"] + layout.pair_map_bytes([0])) // 2,
    ), (java, planned["bytes"])
    assert planned["bytes"] > without_tombstones


def churn_peak(start_ms: int, rate: int, delay_ms: int, span_ms: int, bits: int = 8) -> int:
    """The model's peak under churn, measured as the probe measures the real tracker: nacks at RATE on a clock
    that reads START_MS at the first, the timer run whenever it is due, and the size taken just before each run
    (and at the end)."""
    tracker, peak = NewTracker(bits), 0
    for n in range(rate * span_ms // 1000):
        now = start_ms + n * 1000 / rate
        while tracker.timer_at is not None and tracker.timer_at <= now:
            peak = max(peak, tracker.java_bytes())
            tracker.fire(tracker.timer_at)
        tracker.add(int(now), 1000 + n // 50_000, n % 50_000, delay_ms)
    return max(peak, tracker.java_bytes())


def replayed_peak(events: list, delay_ms: int, bits: int = 8) -> int:
    """The model's peak over the real run as it happened: each add and each timer run at the millisecond the
    tracker's own clock read (the probe tells it from the bucket the add went to and the buckets the run removed),
    the size taken just before each run (and at the end)."""
    tracker, peak, n = NewTracker(bits), 0, 0
    for ms, adds in events:
        if adds == 0:
            peak = max(peak, tracker.java_bytes())
            tracker.fire(ms)
        for _ in range(adds):
            tracker.add(ms, 1000 + n // 50_000, n % 50_000, delay_ms)
            n += 1
    return max(peak, tracker.java_bytes())


def test_new_design_under_churn(measured):
    """The model replays the real run's own clock (the time the tracker itself read, told from what it did), so a
    loaded machine that delays the probe's adds or its timer runs, or stalls it between its own clock read and the
    tracker's, moves both alike: 9 runs by hand on an idle machine, 0.9991 to 0.9994 of the model (24 bytes short, the
    few a bucket JOL does not count); 5 runs beside 8 busy processes, 0.9991 each, where a model on an ideal clock
    from the same start was 0.9991 to 1.05 of them (and 1.085 in a CI run)."""
    rate, delay_ms, span_ms = CHURN
    run = measured["new"][len(WORKLOADS) + 2]
    events = run["events"]
    assert sum(adds for _, adds in events) == run["added"] > 0
    assert sum(1 for _, adds in events if adds == 0) == run["timerRuns"] > 0
    model = replayed_peak(events, delay_ms)
    stall = max(b[0] - a[0] for a, b in zip(events, events[1:]))  # the longest the probe was held, in ms
    said = {"real": run["maxBytes"], "model": model, "clockSlips": run["clockSlips"], "longestStallMs": stall}
    assert LOW * model <= run["maxBytes"] <= HIGH * model, said


def test_the_churn_peak_depends_on_where_in_a_bucket_the_run_starts():
    """Why the churn test runs the model on the real run's clock: the tracker cuts its buckets on the clock's
    256 ms grid, so the same workload started at a bucket's edge or 208 ms into one peaks 10% apart (the first
    timer run finds the most partly filled buckets), far outside the tolerance above."""
    rate, delay_ms, span_ms = CHURN
    peaks = {start: churn_peak(start, rate, delay_ms, span_ms) for start in (0, 208)}
    assert peaks == {0: 27_200, 208: 24_552}, peaks
    assert peaks[208] < LOW * peaks[0]
