"""The fuzzing half of scripts/fuzz_native.sh: SANITIZED_DIR ENTRIES SEED (the directory holds
_scan.so and _render.so built with the sanitizers)."""

import importlib.util
import random
import sys

from pulsar_txn_cli import codec
from pulsar_txn_cli.codec import _render as regular_render
from pulsar_txn_cli.codec import records as codec_records
from pulsar_txn_cli.codec import tojson
from pulsar_txn_cli.pipeline import _scan as regular


def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def tc_record(r):
    record = codec.TcRecord(
        metadata_op=r.randrange(4),
        txnid_most_bits=r.getrandbits(64),
        txnid_least_bits=r.getrandbits(r.choice([5, 64])),
        new_status=r.randrange(5),
        owner="o" * r.randrange(200),
        partitions=["p" * r.randrange(140)] * r.randrange(3),
    )
    for _ in range(r.randrange(3)):
        record.subscriptions.add(topic="t", subscription="s" * r.randrange(130))
    return record


def pa_record(r):
    record = codec.PendingAckRecord(
        pending_ack_op=r.randrange(1, 4), txnid_most_bits=r.getrandbits(64), txnid_least_bits=r.getrandbits(64)
    )
    for _ in range(r.randrange(3)):
        position = record.pending_ack_metadata.add(
            ledgerId=r.getrandbits(64), entryId=r.getrandbits(30), batch_size=r.randrange(-5, 1000)
        )
        position.ack_set.extend(r.getrandbits(63) - (1 << 62) for _ in range(r.randrange(4)))
    return record


def damaged(r, data: bytes) -> bytes:
    out = bytearray(data)
    for _ in range(r.randrange(4)):
        kind, at = r.randrange(4), r.randrange(len(out) + 1)
        if kind == 0 and at < len(out):
            out[at] ^= 1 << r.randrange(8)
        elif kind == 1:
            del out[at : at + r.randrange(1, 6)]
        elif kind == 2:
            out[at:at] = bytes(r.randrange(256) for _ in range(r.randrange(1, 4)))
        else:
            del out[at:]
    return bytes(out)


def normalized(scanned):
    return None if scanned is None else (scanned[0], scanned[1], sorted(scanned[2]), sorted(scanned[3]))


def main(directory: str, entries: int, seed: int) -> None:
    sanitized = load(f"{directory}/_scan.so", "_scan")
    renderer = load(f"{directory}/_render.so", "_render")
    schemas = {
        log: (renderer.schema(tojson.native_spec(t.DESCRIPTOR)), codec_records._SCHEMA[log])
        for log, t in ((codec.TC_LOG, codec.TcRecord), (codec.PENDING_ACK_LOG, codec.PendingAckRecord))
    }
    r, answered, rendered = random.Random(seed), 0, 0
    for _ in range(entries):
        pending_ack = r.random() < 0.5
        records = [(pa_record if pending_ack else tc_record)(r) for _ in range(r.randrange(60))]
        whole = codec.encode_batch(records) if r.random() < 0.8 or not records else codec.encode_single(records[0])
        data = damaged(r, whole)
        got = sanitized.scan(data, pending_ack)
        assert normalized(got) == normalized(regular.scan(data, pending_ack)), data.hex()
        answered += got is not None
        schema, regular_schema = schemas[codec.PENDING_ACK_LOG if pending_ack else codec.TC_LOG]
        batched = codec.is_batched(data)
        text = renderer.render(schema, data, batched)
        assert text == regular_render.render(regular_schema, data, batched), data.hex()
        rendered += text is not None
    print(
        f"{entries} entries ({answered} answered by the scanner, {rendered} by the renderer): "
        "no sanitizer report, same answers as the regular builds"
    )


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
