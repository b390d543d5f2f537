"""Realistic records and entries for the codec tests (the shapes the broker writes)."""

from __future__ import annotations

from pulsar_txn_cli import codec

TC_ML = "pulsar/system/persistent/__transaction_log_0"
PA_ML = "public/default/persistent/orders-partition-0-billing__transaction_pending_ack"
# A readledger header as it comes through log4j in Pulsar's bin/bookkeeper (console appender).
LOG_PREFIX = (
    "2026-11-22T01:02:03,456+0000 [main] INFO  org.apache.bookkeeper.tools.cli.commands.bookie.ReadLedgerCommand - "
)


def tc_lifecycle(least: int, most: int = 1) -> list:
    """NEW, ADD_PARTITION, ADD_SUBSCRIPTION, UPDATE to COMMITTING and COMMITTED of one transaction."""
    t0 = 1_763_770_000_000
    new = codec.TcRecord(
        metadata_op=0,
        txnid_most_bits=most,
        txnid_least_bits=least,
        new_status=0,
        timeout_ms=30_000,
        start_time=t0,
        last_modification_time=t0,
        max_local_txn_id=least,
        owner="pulsar://broker-1:6650",
    )
    part = codec.TcRecord(
        metadata_op=1,
        txnid_most_bits=most,
        txnid_least_bits=least,
        partitions=["persistent://public/default/orders-partition-0"],
        last_modification_time=t0 + 1,
    )
    sub = codec.TcRecord(metadata_op=2, txnid_most_bits=most, txnid_least_bits=least, last_modification_time=t0 + 2)
    sub.subscriptions.add(topic="persistent://public/default/orders-partition-0", subscription="billing")
    committing = codec.TcRecord(
        metadata_op=3,
        txnid_most_bits=most,
        txnid_least_bits=least,
        expected_status=0,
        new_status=1,
        last_modification_time=t0 + 3,
    )
    committed = codec.TcRecord(
        metadata_op=3,
        txnid_most_bits=most,
        txnid_least_bits=least,
        expected_status=1,
        new_status=2,
        last_modification_time=t0 + 4,
    )
    return [new, part, sub, committing, committed]


def pending_ack(least: int, op: int = 1, positions=((12, 3),), cumulative: bool = False, most: int = 1):
    record = codec.PendingAckRecord(pending_ack_op=op, txnid_most_bits=most, txnid_least_bits=least)
    if op == 1:
        record.ack_type = 1 if cumulative else 0
        for ledger, entry in positions:
            record.pending_ack_metadata.add(ledgerId=ledger, entryId=entry, ack_set=[-2], batch_size=10)
    return record
