"""Hypothesis strategies for records of both logs and damaged entries (the codec's, the scanner's and the renderer's properties)."""

from __future__ import annotations

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from pulsar_txn_cli import codec

TC, PA = codec.TC_LOG, codec.PENDING_ACK_LOG
U64 = st.integers(0, 2**64 - 1)
I64 = st.integers(-(2**63), 2**63 - 1)
TEXT = st.text(max_size=40)
SETTINGS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def tc_records(draw):
    record = codec.TcRecord()
    for name, strategy in [
        ("metadata_op", st.sampled_from([0, 1, 2, 3])),
        ("txnid_least_bits", U64),
        ("txnid_most_bits", U64),
        ("expected_status", st.integers(0, 4)),
        ("new_status", st.integers(0, 4)),
        ("timeout_ms", U64),
        ("start_time", U64),
        ("last_modification_time", U64),
        ("max_local_txn_id", U64),
        ("owner", TEXT),
    ]:
        if draw(st.booleans()):
            setattr(record, name, draw(strategy))
    record.partitions.extend(draw(st.lists(TEXT, max_size=3)))
    for topic, sub in draw(st.lists(st.tuples(TEXT, TEXT), max_size=3)):
        record.subscriptions.add(topic=topic, subscription=sub)
    return record


@st.composite
def pa_records(draw):
    record = codec.PendingAckRecord()
    for name, strategy in [
        ("pending_ack_op", st.sampled_from([1, 2, 3])),
        ("ack_type", st.sampled_from([0, 1])),
        ("txnid_least_bits", U64),
        ("txnid_most_bits", U64),
    ]:
        if draw(st.booleans()):
            setattr(record, name, draw(strategy))
    for _ in range(draw(st.integers(0, 3))):
        position = record.pending_ack_metadata.add(ledgerId=draw(U64), entryId=draw(U64))
        position.ack_set.extend(draw(st.lists(I64, max_size=3)))
        if draw(st.booleans()):
            position.batch_size = draw(st.integers(-(2**31), 2**31 - 1))
    return record


LOG_RECORDS = st.one_of(
    st.tuples(st.just(TC), st.lists(tc_records(), max_size=6)),
    st.tuples(st.just(PA), st.lists(pa_records(), max_size=6)),
)


MUTATIONS = st.lists(
    st.one_of(
        st.tuples(st.just("flip"), st.integers(0, 10**6), st.integers(1, 255)),
        st.tuples(st.just("cut"), st.integers(0, 10**6), st.integers(1, 8)),
        st.tuples(st.just("insert"), st.integers(0, 10**6), st.binary(min_size=1, max_size=4)),
        st.tuples(st.just("truncate"), st.integers(0, 10**6), st.just(0)),
    ),
    min_size=1,
    max_size=3,
)


def mutate(data: bytes, mutations) -> bytes:
    out = bytearray(data)
    for kind, at, arg in mutations:
        at = at % (len(out) + 1)
        if kind == "flip" and at < len(out):
            out[at] ^= arg
        elif kind == "cut":
            del out[at : at + arg]
        elif kind == "insert":
            out[at:at] = arg
        elif kind == "truncate":
            del out[at:]
    return bytes(out)


def whole_entries(records) -> list[bytes]:
    """Every entry a writer makes of the records: the batch, and each record alone that encodes to
    something (an all-default record encodes to the empty entry, an error)."""
    return [codec.encode_batch(records)] + [codec.encode_single(r) for r in records if r.ByteSize()]


def damaged_entry(records, batched: bool, mutations) -> bytes:
    """The records as one entry (batched, or the first that encodes to something alone: an all-default
    record encodes to the empty entry), then damaged by `mutations`."""
    records = [r for r in records if r.ByteSize()] or records
    data = codec.encode_batch(records) if batched or not records else codec.encode_single(records[0])
    return mutate(data, mutations)
