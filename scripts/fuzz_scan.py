"""The fuzzing half of scripts/fuzz_scan.sh: SANITIZED_SO ENTRIES SEED."""

import importlib.util
import random
import sys

from pulsar_txn_cli import codec
from pulsar_txn_cli.pipeline import _scan as regular


def load(path):
    spec = importlib.util.spec_from_file_location("_scan", path)
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


def main(path: str, entries: int, seed: int) -> None:
    sanitized, r, answered = load(path), random.Random(seed), 0
    for _ in range(entries):
        pending_ack = r.random() < 0.5
        records = [(pa_record if pending_ack else tc_record)(r) for _ in range(r.randrange(60))]
        whole = codec.encode_batch(records) if r.random() < 0.8 or not records else codec.encode_single(records[0])
        data = damaged(r, whole)
        got = sanitized.scan(data, pending_ack)
        assert normalized(got) == normalized(regular.scan(data, pending_ack)), data.hex()
        answered += got is not None
    print(
        f"{entries} entries ({answered} answered by the scanner): no sanitizer report, same answers as the regular build"
    )


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
