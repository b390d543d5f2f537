"""TxnLogBufferedWriterTest, mirrored (Pulsar's pulsar-transaction/coordinator tests)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pulsar_txn_cli.codec import PREFIX
from pulsar_txn_cli.engine.ledger import BatchedPosition
from pulsar_txn_cli.engine.writer import SerializeFailed, WriterClosed
from pulsar_txn_cli.names import Position
from tests.engine.helpers import records_of


def _payload(i: int, size: int = 4) -> bytes:
    """A valid TC record (txnid_least_bits = i) padded with owner to `size` bytes, or one byte
    short where the encoding cannot hit it (owner's length takes a second byte past 127)."""
    from pulsar_txn_cli.codec import TcRecord

    rec = TcRecord(txnid_least_bits=i)
    room = size - len(rec.SerializeToString())
    if room >= 2:  # owner costs a tag byte, its length's varint, then the text
        rec.owner = "x" * (room - 2 if room - 2 <= 127 else room - 3)
    return rec.SerializeToString()


@pytest.mark.parametrize(
    "max_records, max_size, writes, batch",
    [
        (512, 1024 * 1024, 2000, True),  # normal
        (512, 1024 * 1024, 100, True),  # few writes
        (512, 1024 * 1024, 5000, True),  # many writes
        (1, 1024 * 1024, 50, True),  # batch of one: batching off
        (2, 1024 * 1024, 51, True),  # batch of two
        (512, 1024 * 1024, 100, False),  # batching disabled
    ],
)
def test_main_process(rig, max_records, max_size, writes, batch):
    writer = rig.writer(max_records=max_records, max_size=max_size, max_delay_ms=1, batch_enabled=batch)
    for i in range(writes):
        rig.add(writer, _payload(i), tag=i)
        if i % 97 == 0:
            rig.tick(0.5)
    rig.clock.run_until_idle()
    assert not rig.failed
    # Every callback once, in write order.
    assert [tag for tag, _ in rig.done] == list(range(writes))
    entries = rig.entries()
    positions = {(p.ledger, p.entry) for _, p in rig.done}
    assert len(entries) == len(positions)
    by_key = {(l, e): d for l, e, d in entries}
    batched = batch and max_records > 1
    for tag, pos in rig.done:
        data = by_key[(pos.ledger, pos.entry)]
        if batched:
            assert data.startswith(PREFIX)
            decoded = records_of(data)
            assert pos.batch_size == len(decoded.records) and 0 <= pos.batch_index < pos.batch_size
            assert decoded.records[pos.batch_index].SerializeToString() == _payload(tag)
        else:
            assert pos.batch_size is None and data == _payload(tag)
    if batched:
        # Indexes 0..n-1 within each entry, in order.
        seen: dict = {}
        for _, pos in rig.done:
            seen.setdefault(tuple(pos), []).append(pos.batch_index)
        assert all(v == list(range(len(v))) for v in seen.values())


def test_large_records_are_written_alone_unbatched(rig):
    writer = rig.writer(max_records=512, max_size=1024)
    big = _payload(1, 1024)
    assert len(big) == 1024  # exactly max size: `>=`
    for i in range(10):
        rig.add(writer, big, tag=i)
    assert len(rig.entries()) == 10
    assert all(pos.batch_size is None for _, pos in rig.done)
    assert all(data == big for _, _, data in rig.entries())
    # The buffer was empty every time: no large-data trigger.
    assert rig.metrics.tc.counters["large_data"] == 0


def test_large_record_flushes_the_buffer_first(rig):
    writer = rig.writer(max_records=512, max_size=1024)
    for i in range(50):
        rig.add(writer, _payload(i, 8), tag=("small", i))
        rig.add(writer, _payload(i, 1024), tag=("large", i))
    # 100 ledger writes, 50 large-data triggers (each flushed one small record).
    assert len(rig.entries()) == 100
    assert rig.metrics.tc.counters["large_data"] == 50
    assert [t for t, _ in rig.done] == [(k, i) for i in range(50) for k in ("small", "large")]
    smalls = [p for (k, _), p in rig.done if k == "small"]
    assert all(p.batch_size == 1 and p.batch_index == 0 for p in smalls)


def test_flush_thresholds(rig):
    # Delay: no flush before the tick, a flush at it.
    writer = rig.writer(max_records=512, max_size=1 << 20, max_delay_ms=100)
    rig.add(writer, _payload(0))
    rig.tick(90)
    assert rig.done == [] and writer.buffered == 1
    rig.tick(20)
    assert len(rig.done) == 1 and rig.metrics.tc.counters["max_delay"] == 1


def test_flush_by_max_records(rig):
    writer = rig.writer(max_records=32, max_size=1 << 20, max_delay_ms=100_000)
    for i in range(31):
        rig.add(writer, _payload(i))
    assert rig.done == []
    rig.add(writer, _payload(31))
    assert len(rig.done) == 32 and rig.done[-1][1].batch_size == 32
    assert rig.metrics.tc.counters["max_records"] == 1


def test_flush_by_max_size(rig):
    writer = rig.writer(max_records=10_000, max_size=256, max_delay_ms=100_000)
    for i in range(63):
        rig.add(writer, _payload(i, 4))
    assert rig.done == []
    rig.add(writer, _payload(63, 4))
    assert len(rig.done) == 64
    assert rig.metrics.tc.counters["max_size"] == 1


def test_metrics_after_each_trigger(rig):
    m = rig.metrics.tc
    writer = rig.writer(max_records=10, max_size=1024, max_delay_ms=5)
    for i in range(10):
        rig.add(writer, _payload(i, 10))
    assert m.counters == {"max_records": 1, "max_size": 0, "max_delay": 0, "large_data": 0}
    assert m.hist["batch_records"]["count"] == 1 and m.hist["batch_records"]["sum"] == 10
    assert m.hist["batch_size_bytes"]["sum"] == 100
    for i in range(3):
        rig.add(writer, _payload(i, 400))
    assert m.counters["max_size"] == 1
    rig.add(writer, _payload(0, 10))
    rig.tick(5)
    assert m.counters["max_delay"] == 1
    rig.add(writer, _payload(0, 10))
    rig.add(writer, _payload(1, 2000))
    assert m.counters["large_data"] == 1
    assert m.hist["batch_records"]["count"] == 4
    # The delay histogram's buckets are seconds: every sub-second delay lands in le="1".
    assert m.hist["batch_oldest_record_delay_seconds"]["buckets"][0] == 4
    text = rig.metrics.prometheus()
    assert 'pulsar_txn_tc_bufferedwriter_flush_trigger_max_delay_total{cluster="test",broker="localhost"} 1.0' in text
    assert 'pulsar_txn_tc_bufferedwriter_batch_records_bucket{cluster="test",broker="localhost",le="10.0"} 4.0' in text


def test_no_metrics_when_batching_is_disabled(rig):
    writer = rig.writer(batch_enabled=False)
    for i in range(20):
        rig.add(writer, _payload(i))
    assert len(rig.done) == 20
    assert all(v == 0 for v in rig.metrics.tc.counters.values())
    assert rig.metrics.tc.hist["batch_records"]["count"] == 0


@pytest.mark.parametrize("batch", [True, False])
def test_a_bookie_that_always_fails(rig, batch):
    rig.ml.fail_adds = lambda data: True  # stands in for a failing bookie (cannot be had for real)
    writer = rig.writer(max_records=4, batch_enabled=batch)
    for i in range(10):
        rig.add(writer, _payload(i), tag=i)
    rig.clock.run_until_idle()
    assert rig.done == [] and sorted(t for t, _ in rig.failed) == list(range(10))
    assert rig.entries() == []


@pytest.mark.parametrize("batch", [True, False])
def test_a_bookie_that_sometimes_fails(rig, batch):
    calls = {"n": 0}

    def flaky(data):
        calls["n"] += 1
        return calls["n"] % 3 == 0

    rig.ml.fail_adds = flaky
    writer = rig.writer(max_records=4, batch_enabled=batch)
    for i in range(40):
        rig.add(writer, _payload(i), tag=i)
    rig.clock.run_until_idle()
    assert rig.failed and rig.done
    assert sorted([t for t, _ in rig.done] + [t for t, _ in rig.failed]) == list(range(40))
    done = [t for t, _ in rig.done]
    assert done == sorted(done)
    assert sum(len(records_of(d).records) for _, _, d in rig.entries()) == len(done)


def test_a_refused_commit_fails_the_adds(rig):
    writer = rig.writer(max_records=4)
    rig.store.fail_commits = True  # a disk that refuses writes
    for i in range(4):
        rig.add(writer, _payload(i), tag=i)
    rig.store.fail_commits = False
    assert rig.done == [] and [t for t, _ in rig.failed] == [0, 1, 2, 3]
    assert rig.entries() == []


@pytest.mark.parametrize("batch", [True, False])
def test_close_mid_stream(rig, batch):
    writer = rig.writer(max_records=10, batch_enabled=batch)
    for i in range(25):
        rig.add(writer, _payload(i), tag=i)
    writer.close()
    for i in range(25, 30):
        rig.add(writer, _payload(i), tag=i)
    rig.clock.run_until_idle()
    done = [t for t, _ in rig.done]
    failed = [t for t, _ in rig.failed]
    assert sorted(done + failed) == list(range(30))
    assert done == list(range(20 if batch else 25))
    assert all(isinstance(exc, WriterClosed) and "has closed" in str(exc) for _, exc in rig.failed)


def test_serializer_failure_fails_every_add_and_writes_nothing(rig):
    writer = rig.writer(serialize=lambda record: 1 / 0)
    for i in range(5):
        rig.add(writer, _payload(i), tag=i)
    rig.clock.run_until_idle()
    assert rig.done == [] and len(rig.failed) == 5
    assert all(isinstance(exc, SerializeFailed) for _, exc in rig.failed)
    assert rig.entries() == []


def test_callbacks_fire_only_after_the_commit(rig):
    """A callback that reads the database sees its entry (the commit came first)."""
    seen = []
    writer = rig.writer(max_records=2)

    def check(pos):
        seen.append(
            rig.store.db.execute(
                "SELECT COUNT(*) FROM entries WHERE ledger_id=? AND entry_id=?", (pos.ledger, pos.entry)
            ).fetchone()[0]
        )

    writer.add(_payload(0), check)
    writer.add(_payload(1), check)
    assert seen == [1, 1] and not rig.store.db.in_transaction


@pytest.mark.parametrize("size, index", [(10, 5), (64, 0), (64, 63), (230, 120), (256, 255)])
def test_ack_set_by_index(size, index):
    words = BatchedPosition(1, 2, size, index).ack_set()
    bits = sum(w << (64 * i) for i, w in enumerate(words))
    assert all(((bits >> i) & 1) == (0 if i == index else 1) for i in range(size))
    assert bits >> size == 0


def test_batched_positions_are_plain_positions_as_keys():
    batched = BatchedPosition(3, 7, 10, 4)
    plain = BatchedPosition(3, 7)
    assert batched == plain and hash(batched) == hash(plain)
    assert {plain: "x"}[batched] == "x"
    assert not (batched < plain) and not (batched > plain)
    assert BatchedPosition(3, 7, 1, 0).ack_set() is None  # batch of 1: the whole entry
    # One position type: a batched position is names.Position extended, as in Pulsar.
    assert isinstance(batched, Position) and batched == Position(3, 7) and str(batched) == "3:7"


def test_timer_tasks_do_not_pile_up(rig):
    """testPendingScheduleTriggerTaskCount: one armed timer per writer, however many adds."""
    writer = rig.writer(max_records=100_000, max_size=1 << 30, max_delay_ms=10)
    for i in range(1000):
        rig.add(writer, _payload(i))
    assert len(rig.clock._timers) == 1
    rig.tick(10)
    assert len(rig.done) == 1000 and rig.clock._timers == []


@settings(max_examples=40, deadline=None)
@given(
    ops=st.lists(st.one_of(st.integers(min_value=1, max_value=300), st.just("tick")), min_size=1, max_size=120),
    max_records=st.integers(min_value=0, max_value=12),
    max_size=st.integers(min_value=16, max_value=600),
    batch=st.booleans(),
)
def test_any_sequence_keeps_the_writer_contract(tmp_path_factory, ops, max_records, max_size, batch):
    """Property: every add called back once, in order; entries hold exactly the records written."""
    from tests.engine.helpers import Rig

    rig = Rig(tmp_path_factory.mktemp("w") / "engine")
    try:
        writer = rig.writer(max_records=max_records, max_size=max_size, max_delay_ms=2, batch_enabled=batch)
        written = []
        for op in ops:
            if op == "tick":
                rig.tick(1)
                continue
            data = _payload(len(written), max(op, 4))
            written.append(data)
            rig.add(writer, data, tag=len(written) - 1)
        rig.clock.run_until_idle()
        assert not rig.failed and [t for t, _ in rig.done] == list(range(len(written)))
        stored = {}
        for lid, eid, data in rig.entries():
            decoded = records_of(data)
            stored[(lid, eid)] = [r.SerializeToString() for r in decoded.records]
        for tag, pos in rig.done:
            records = stored[tuple(pos)]
            index = pos.batch_index if pos.batch_size is not None else 0
            assert records[index] == written[tag]
            if pos.batch_size is None:
                assert len(records) == 1
            if writer.batch_enabled and len(written[tag]) >= max_size:
                assert pos.batch_size is None  # large records are written alone, unbatched
        assert sum(len(v) for v in stored.values()) == len(written)
    finally:
        rig.close()
