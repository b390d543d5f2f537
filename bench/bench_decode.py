"""Decode throughput: the codec vs the protobuf runtime's bare parse, and `decode -o jsonl` of 1M records.

    .venv/bin/python -m bench decode [--records=N] [--rounds=R] [--entries=E] [--skip-cli]

Part 1 decodes batched entries of 512 records (both logs) three ways, interleaved round by round
so that load on the machine hits all of them alike, and keeps each one's best round (CPU time of
this single-threaded process, since wall time on a shared machine mostly measures the others):
  baseline   the protobuf runtime parses the container and the code reads every field of every record;
  objects    codec.decode_entry (framing, required-field check, records as protobuf messages);
  json       decode_entry + entry_to_json (the documented JSON shape as Python dicts);
  jsonl      decode_entry + the entry's JSONL line as `decode -o jsonl` writes it (records from the
             native renderer where it is built, else from the dicts), orjson included.
Target: objects and json at no less than 0.5x the baseline.

Part 2 writes a JSONL dump of at least N records (default 1,024,000: 2,000 entries) in whole 512-record
batches and times `pulsar-txn decode DUMP -o jsonl > /dev/null` as a real process (wall and CPU, the CPU of any child
processes included). Target: < 3 s wall for 1,024,000 records.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.machine import installed_env

BATCH = 512
TC_ML = "pulsar/system/persistent/__transaction_log_0"
PA_ML = "public/default/persistent/orders-partition-0-billing__transaction_pending_ack"


def tc_batch(first: int):
    from pulsar_txn_cli import codec

    records = []
    for i in range(first, first + BATCH):
        op = i % 4
        r = codec.TcRecord(
            metadata_op=op, txnid_most_bits=1, txnid_least_bits=i // 4, last_modification_time=1_763_770_000_000 + i
        )
        if op == 0:
            r.timeout_ms, r.start_time, r.max_local_txn_id, r.owner = (
                30_000,
                1_763_770_000_000 + i,
                i // 4,
                "pulsar://broker-1:6650",
            )
        elif op == 1:
            r.partitions.append(f"persistent://public/default/orders-partition-{i % 8}")
        elif op == 2:
            r.subscriptions.add(topic=f"persistent://public/default/orders-partition-{i % 8}", subscription="billing")
        else:
            r.expected_status, r.new_status = 1, 2
        records.append(r)
    return records


def pa_batch(first: int):
    from pulsar_txn_cli import codec

    records = []
    for i in range(first, first + BATCH):
        r = codec.PendingAckRecord(pending_ack_op=1 + (i % 3 == 2), txnid_most_bits=1, txnid_least_bits=i)
        if r.pending_ack_op == 1:
            r.ack_type = 0
            r.pending_ack_metadata.add(ledgerId=12, entryId=i, ack_set=[-2], batch_size=10)
        records.append(r)
    return records


def _touch_tc(r) -> None:
    _ = (
        r.metadata_op,
        r.txnid_least_bits,
        r.txnid_most_bits,
        r.expected_status,
        r.new_status,
        r.timeout_ms,
        r.start_time,
        r.last_modification_time,
        r.max_local_txn_id,
        r.owner,
    )
    for _p in r.partitions:
        pass
    for s in r.subscriptions:
        _ = (s.topic, s.subscription)


def _touch_pa(r) -> None:
    _ = (r.pending_ack_op, r.ack_type, r.txnid_least_bits, r.txnid_most_bits)
    for m in r.pending_ack_metadata:
        _ = (m.ledgerId, m.entryId, list(m.ack_set), m.batch_size)


def part1(rounds: int, entries_per_round: int) -> None:
    import orjson

    from pulsar_txn_cli import codec
    from pulsar_txn_cli.codec import records as codec_records
    from pulsar_txn_cli.codec.gen import PulsarTransactionMetadata_pb2 as tc_pb2
    from pulsar_txn_cli.codec.gen import TransactionPendingAck_pb2 as pa_pb2

    cases = {
        "tc": (
            [codec.encode_batch(tc_batch(i * BATCH)) for i in range(entries_per_round)],
            tc_pb2.BatchedTransactionMetadataEntry,
            "transaction_logs",
            _touch_tc,
        ),
        "pending-ack": (
            [codec.encode_batch(pa_batch(i * BATCH)) for i in range(entries_per_round)],
            pa_pb2.BatchedPendingAckMetadataEntry,
            "pending_ack_logs",
            _touch_pa,
        ),
    }
    print(f"part 1: {entries_per_round} batched entries x {BATCH} records per round, best of {rounds} rounds")
    print(
        f"  native renderer: {'built' if codec_records.NATIVE is not None else 'not built (jsonl goes through the dicts)'}"
    )
    print(f"  {'log':<12} {'variant':<9} {'records/s':>12} {'x baseline':>11}")
    for log, (entries, container_type, field, touch) in cases.items():

        def baseline(entries=entries, container_type=container_type, field=field, touch=touch):
            for data in entries:
                container = container_type()
                container.ParseFromString(data[4:])
                for record in getattr(container, field):
                    touch(record)

        def objects(entries=entries, log=log):
            for data in entries:
                codec.decode_entry(data, log)

        def as_json(entries=entries, log=log):
            for data in entries:
                codec.entry_to_json(codec.decode_entry(data, log))

        def as_jsonl(entries=entries, log=log):
            for data in entries:
                orjson.dumps(codec.entry_to_json(codec.decode_entry(data, log), compact=True))

        variants = {"baseline": baseline, "objects": objects, "json": as_json, "jsonl": as_jsonl}
        best = {name: float("inf") for name in variants}
        for _ in range(rounds):
            for name, fn in variants.items():
                start = time.process_time()  # CPU time: the machine is shared, wall time is noise
                fn()
                best[name] = min(best[name], time.process_time() - start)
        records = entries_per_round * BATCH
        for name in variants:
            rate = records / best[name]
            print(f"  {log:<12} {name:<9} {rate:>12,.0f} {best['baseline'] / best[name]:>10.2f}x")


def write_dump(path: Path, records: int) -> tuple[int, int]:
    """Whole 512-record batches until at least `records` are written; returns (entries, records)."""
    from pulsar_txn_cli import codec
    from pulsar_txn_cli.codec import dumps

    # Serialize a few batches once and repeat them: building 1M protobuf objects is not the point.
    tc_entries = [codec.encode_batch(tc_batch(i * BATCH)) for i in range(4)]
    pa_entries = [codec.encode_batch(pa_batch(i * BATCH)) for i in range(4)]
    with path.open("w") as out:
        written, entry_id = 0, 0
        while written < records:
            data = (tc_entries if entry_id % 2 == 0 else pa_entries)[entry_id % 4]
            ml = TC_ML if entry_id % 2 == 0 else PA_ML
            out.write(dumps.dump_line(ml, 1000 + entry_id % 2, entry_id // 2, data) + "\n")
            written += BATCH
            entry_id += 1
    return entry_id, written


def part2(records: int) -> None:
    exe = Path(sys.executable).parent / "pulsar-txn"
    command = [str(exe)] if exe.exists() else [sys.executable, "-m", "pulsar_txn_cli"]
    with tempfile.TemporaryDirectory() as tmp:
        dump = Path(tmp) / "dump.jsonl"
        entries, written = write_dump(dump, records)
        size = dump.stat().st_size
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        with open(os.devnull, "wb") as sink:
            result = subprocess.run(
                [*command, "decode", str(dump), "-o", "jsonl"],
                stdout=sink,
                stderr=subprocess.PIPE,
                text=True,
                env=installed_env(),
            )
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        if result.returncode != 0:
            print(f"part 2: decode failed ({result.returncode}): {result.stderr.strip()}")
            return
        print(
            f"part 2: pulsar-txn decode -o jsonl of {written:,} records ({size / 1e6:.0f} MB dump, {entries:,} entries)"
        )
        print(
            f"  wall {wall:.2f} s, CPU {cpu:.2f} s, {written / wall:,.0f} records/s wall "
            f"(target for 1,024,000 records: < 3 s)"
        )


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="bench decode")
    parser.add_argument("--records", type=int, default=1_024_000)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--entries", type=int, default=20, help="batched entries per round and log in part 1")
    parser.add_argument("--skip-cli", action="store_true")
    args = parser.parse_args(argv)
    part1(args.rounds, args.entries)
    if not args.skip_cli:
        part2(args.records)


if __name__ == "__main__":
    main(sys.argv[1:])
