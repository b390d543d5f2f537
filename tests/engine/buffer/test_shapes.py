"""The buffer's REST answers against Pulsar's documented shapes and, once captured, a real broker's.

The real answers come from the real-broker harness (tests/fixtures/real/rest/); the comparison
runs for each captured transactionBufferStats / transactionBufferInternalStats file found there.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pulsar_txn_cli.engine.broker import Engine
from pulsar_txn_cli.engine import router
from pulsar_txn_cli.engine.router import handle

from tests.engine.buffer.engine_helpers import TOPIC

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "real" / "rest"
STATS_KEYS = {
    "state",
    "maxReadPosition",
    "lastSnapshotTimestamps",
    "ongoingTxnSize",
    "recoverStartTime",
    "recoverEndTime",
}
ML_STATS_KEYS = {
    "entriesAddedCounter",
    "numberOfEntries",
    "totalSize",
    "currentLedgerEntries",
    "currentLedgerSize",
    "lastLedgerCreatedTimestamp",
    "waitingCursorsCount",
    "pendingAddEntriesCount",
    "lastConfirmedEntry",
    "state",
    "ledgers",
    "cursors",
}


def _engine(directory, **settings) -> Engine:
    engine = Engine.init(directory, coordinators=1)
    settings = {"managedLedgerMaxEntriesPerLedger": 4, "managedLedgerMinLedgerRolloverTimeMinutes": 0, **settings}
    for name, value in settings.items():
        engine.config.set(name, str(value).lower())
    return engine


def _answers(segmented: bool, tmp_path):
    """The buffer's routes of the engine's router, called as the router calls them (before it drops
    null fields, as Pulsar's JSON mapper does), and the router itself for the error paths."""
    engine = _engine(tmp_path / ("seg" if segmented else "single"), transactionBufferSegmentedSnapshotEnabled=segmented)
    engine.buffers.publish(TOPIC, b"x", (0, 1))
    engine.buffers.end_transaction((0, 1), [TOPIC], committed=False, low_water_mark=1)
    engine.buffers.publish(TOPIC, b"open", (0, 2))
    orders = ("public", "default", "orders")
    answers = {
        "stats": router.transaction_buffer_stats(engine, {"lowWaterMarks": "true"}, None, *orders),
        "plain": router.transaction_buffer_stats(engine, {}, None, *orders),
        "internal": router.transaction_buffer_internal_stats(engine, {}, None, *orders),
        "in_buffer": router.transaction_in_buffer_stats(engine, {}, None, *orders, "0", "2"),
        "in_buffer_ended": router.transaction_in_buffer_stats(engine, {}, None, *orders, "0", "1"),
        "missing": handle(engine, "GET", "/admin/v3/transactions/transactionBufferStats/public/default/nope", {}),
        "other": handle(engine, "GET", "/admin/v3/transactions/coordinatorStats", {}),
    }
    engine.close()
    return answers


@pytest.mark.parametrize("segmented", [False, True])
def test_rest_answers_have_pulsars_shapes(segmented, tmp_path):
    answers = _answers(segmented, tmp_path)
    status, stats = answers["stats"]
    assert status == 200
    assert STATS_KEYS <= set(stats) and stats["state"] == "Ready" and stats["ongoingTxnSize"] == 1
    assert stats["lowWaterMarks"] == {"0": 1}
    assert "lowWaterMarks" not in answers["plain"][1]
    assert (stats["snapshotType"], stats["totalAbortedTransactions"]) == ("Segment" if segmented else "Single", 1)
    assert ("segmentsStats" in stats) == segmented
    if segmented:
        assert stats["segmentsStats"]["unsealedAbortTxnIDSize"] == 1 and stats["segmentsStats"]["segmentsSize"] == 0
    status, internal = answers["internal"]
    assert status == 200 and internal["snapshotType"] == ("Segment" if segmented else "Single")
    names = (
        ["segmentInternalStats", "segmentIndexInternalStats"]
        if segmented
        else ["singleSnapshotSystemTopicInternalStats"]
    )
    assert set(internal) == {"snapshotType", *names}
    for name in names:
        topic_stats = internal[name]
        assert set(topic_stats) == {"managedLedgerName", "managedLedgerInternalStats"}
        assert topic_stats["managedLedgerName"].startswith("__transaction_buffer_snapshot")  # a broker's local name
        assert ML_STATS_KEYS <= set(topic_stats["managedLedgerInternalStats"])
    status, in_buffer = answers["in_buffer"]
    assert status == 200 and set(in_buffer) == {"startPosition", "aborted"} and in_buffer["aborted"] is False
    assert answers["in_buffer_ended"] == (200, {"aborted": True})
    assert answers["missing"][0] == 404
    # not the buffer's route: the coordinator answers it ({coordinator id: stats})
    assert answers["other"][0] == 200 and set(answers["other"][1]) == {"0"}


def _captured(name: str) -> list[Path]:
    """The harness's saved answers (`{"request", "status", "body"}`) named NAME or NAME_*, status 200."""
    if not FIXTURES.is_dir():
        return []
    files = sorted(set(FIXTURES.glob(f"{name}.json")) | set(FIXTURES.glob(f"{name}_*.json")))
    return [f for f in files if json.loads(f.read_text()).get("status", 200) == 200]


def _shape(value):
    if isinstance(value, dict):
        return {k: _shape(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_shape(value[0])] if value else []
    return type(value).__name__ if value is not None else None


def _compare(real, ours, where=""):
    """Every key of the real answer exists in ours with the same JSON type (None matches anything)."""
    problems = []
    if isinstance(real, dict) and isinstance(ours, dict):
        if not real:
            return []  # an empty map (lowWaterMarks {}): its keys are data, not fields
        for key, value in real.items():
            if key not in ours:
                if value is not None:  # null and absent are the same to Pulsar's clients
                    problems.append(f"{where}.{key} missing")
            else:
                problems += _compare(value, ours[key], f"{where}.{key}")
        for key in set(ours) - set(real):
            problems.append(f"{where}.{key} not in the real answer")
    elif (
        real is not None
        and ours is not None
        and type(real) is not type(ours)
        and not (isinstance(real, list) and isinstance(ours, list))
    ):
        problems.append(f"{where}: {type(real).__name__} vs {type(ours).__name__}")
    return problems


@pytest.mark.parametrize(
    "kind", ["transactionBufferStats", "transactionBufferInternalStats", "transactionInBufferStats"]
)
def test_keys_and_types_match_the_real_broker(kind, tmp_path):
    files = _captured(kind)
    if not files:
        pytest.fail(f"no captured {kind} answer in {FIXTURES}: the committed fixtures are incomplete")
    for file in files:
        real = json.loads(file.read_text())["body"]
        segmented = "snapshotStats" in real or real.get("snapshotType") == "Segment"
        in_buffer = "in_buffer" if "startPosition" in real else "in_buffer_ended"
        ours = _answers(segmented, tmp_path / file.stem)[
            {
                "transactionBufferStats": "stats",
                "transactionBufferInternalStats": "internal",
                "transactionInBufferStats": in_buffer,
            }[kind]
        ][1]
        if kind == "transactionBufferStats":
            ours = {k: v for k, v in ours.items() if k != "lowWaterMarks" or "lowWaterMarks" in real}
        if kind == "transactionBufferInternalStats":  # the managed-ledger stats are the engine's, compared elsewhere
            ours = {
                k: {"managedLedgerName": v["managedLedgerName"]} if isinstance(v, dict) else v for k, v in ours.items()
            }
            real = {
                k: {"managedLedgerName": v["managedLedgerName"]} if isinstance(v, dict) else v
                for k, v in real.items()
                if v is not None
            }
        assert _compare(real, ours) == [], file.name


def test_partitioned_metadata_matches_the_real_broker(tmp_path):
    files = _captured("partitioned_topic_metadata")
    if not files:
        pytest.fail(
            f"no captured partitioned_topic_metadata answer in {FIXTURES}: the committed fixtures are incomplete"
        )
    engine = _engine(tmp_path / "e")
    try:
        ours = handle(engine, "GET", "/admin/v2/persistent/public/default/orders/partitions", {})[1]
    finally:
        engine.close()
    for file in files:
        real = json.loads(file.read_text())["body"]
        assert set(real) <= set(ours) | {"deleted"}, file.name
        assert isinstance(ours["partitions"], type(real["partitions"]))
