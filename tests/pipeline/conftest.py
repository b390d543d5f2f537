"""Fixtures for the pipeline tests: hand-built dumps with known counts and one shared SparkSession."""

from __future__ import annotations

import os
import sys

import pytest

from pulsar_txn_cli import codec
from pulsar_txn_cli.codec import dumps, readledger
from pulsar_txn_cli.pipeline import distinct
from tests.conftest import missing_tool

TC_ML = "pulsar/system/persistent/__transaction_log_0"
TC_ML1 = "pulsar/system/persistent/__transaction_log_1"
PA_ML = "public/default/persistent/orders-partition-0-billing__transaction_pending_ack"


def tc(op: int, least: int, status: int = 0, most: int = 0):
    return codec.TcRecord(metadata_op=op, txnid_most_bits=most, txnid_least_bits=least, new_status=status)


def lifecycle(least: int, most: int = 0) -> list:
    """NEW, ADD_PARTITION, ADD_SUBSCRIPTION, UPDATE:COMMITTING, UPDATE:COMMITTED."""
    return [
        tc(0, least, most=most),
        tc(1, least, most=most),
        tc(2, least, most=most),
        tc(3, least, 1, most),
        tc(3, least, 2, most),
    ]


def ack(least: int, op: int = 1, most: int = 0):
    record = codec.PendingAckRecord(pending_ack_op=op, txnid_most_bits=most, txnid_least_bits=least)
    if op == 1:
        record.pending_ack_metadata.add(ledgerId=7, entryId=1)
    return record


def write_jsonl(path, entries) -> str:
    """entries: (managedLedger, ledgerId, entryId, bytes) or a raw line (str)."""
    with open(path, "w") as f:
        for entry in entries:
            f.write((entry if isinstance(entry, str) else dumps.dump_line(*entry)) + "\n")
    return str(path)


def write_parquet(path, entries) -> str:
    import pyarrow as pa
    import pyarrow.parquet as pq

    columns = list(zip(*entries))
    table = pa.table(
        {
            "managedLedger": pa.array(columns[0], pa.string()),
            "ledgerId": pa.array(columns[1], pa.int64()),
            "entryId": pa.array(columns[2], pa.int64()),
            "data": pa.array(columns[3], pa.binary()),
        }
    )
    pq.write_table(table, str(path), row_group_size=3)
    return str(path)


def write_readledger(path, ledger_id, datas) -> str:
    with open(path, "w") as f:
        f.write("2026-11-22T01:02:03,456+0000 [main] INFO  org.apache.bookkeeper.tools.cli - starting\n")
        for entry_id, data in enumerate(datas):
            f.write(readledger.format_entry(ledger_id, entry_id, data))
    return str(path)


@pytest.fixture
def mixed(tmp_path):
    """A TC log with a batched ledger (3), a mixed ledger (4) and an unbatched one (5), plus a
    pending-ack log; known counts are asserted in test_local.py."""
    entries = [
        (TC_ML, 3, 0, codec.encode_batch(lifecycle(1) + lifecycle(2))),  # 10 records
        (TC_ML, 3, 1, codec.encode_batch([tc(0, 3), tc(0, 4)])),  # 2 records
        (TC_ML, 4, 0, codec.encode_single(tc(0, 5))),
        (TC_ML, 4, 1, codec.encode_batch(lifecycle(5)[1:] + [tc(3, 6, 4), tc(3, 7, 3)])),  # 6 records
        (TC_ML, 4, 2, b"\x0e\x01\x00\x01\x0a\xff"),  # corrupt: a truncated batch
        (TC_ML, 5, 0, codec.encode_single(tc(0, 8))),
        (TC_ML, 5, 1, codec.encode_single(tc(3, 8, 1))),
        (PA_ML, 9, 0, codec.encode_batch([ack(1), ack(2), ack(2)])),
        (PA_ML, 9, 1, codec.encode_single(ack(1, op=2))),
        (PA_ML, 10, 0, codec.encode_single(ack(2, op=3))),
    ]
    return tmp_path, entries


@pytest.fixture
def many_inputs(mixed):
    """Every input kind, corrupt entries, three logs, and one log past the exact distinct limit."""
    tmp, entries = mixed
    bad_lines = ["{oops", '{"managedLedger": "%s", "ledgerId": 8, "entryId": 0, "data": "%%%%"}' % TC_ML]
    empty = [("pulsar/system/persistent/__transaction_log_7", 1, 0, codec.encode_batch([]))]  # no records at all
    files = [write_jsonl(tmp / "mixed.jsonl", entries + bad_lines + empty)]
    (tmp / "pq").mkdir()
    per_entry = 500
    big = [
        (TC_ML1, 20 + i // 50, i % 50, codec.encode_batch([tc(0, i * per_entry + j, most=1) for j in range(per_entry)]))
        for i in range(distinct.EXACT_LIMIT // per_entry + 20)
    ]
    files.append(write_parquet(tmp / "pq" / "big.parquet", big + [(TC_ML1, 99, 0, None)]))
    files.append(
        write_parquet(
            tmp / "pq" / "acks.parquet", [(PA_ML, 11, i, codec.encode_batch([ack(i), ack(i + 1)])) for i in range(7)]
        )
    )
    files.append(
        write_readledger(
            tmp / "rl.txt", 30, [codec.encode_single(tc(0, 900)), b"\x0e\x01", codec.encode_batch([tc(1, 900)] * 3)]
        )
    )
    return files


@pytest.fixture(scope="session")
def spark():
    """One local[2] SparkSession for the whole test session (starting one takes seconds)."""
    from pulsar_txn_cli.pipeline import spark_job

    if not spark_job.java_available():
        missing_tool("Java 17, which Spark needs, is")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    session = spark_job.Session(
        "local[2]",
        {"spark.default.parallelism": "2", "spark.ui.enabled": "false"},
    )
    active = session.__enter__()
    yield active
    session.__exit__(None, None, None)


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    """A real S3-compatible server (S3Proxy) for a module of the spark_cluster set."""
    from .standalone import S3Proxy

    with S3Proxy(tmp_path_factory.mktemp("s3proxy")) as server:
        yield server
