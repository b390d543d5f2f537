"""writer_metrics keeps only the buffered-writer samples of a broker's whole /metrics page (at 1,000
transactional subscriptions the page's per-topic samples, all kept, dominated the commands' memory)."""

from __future__ import annotations

from pulsar_txn_cli.admin import writer_metrics

PAGE = "\n".join(
    [
        "# TYPE pulsar_txn_pending_ack_store_bufferedwriter_batch_records_count counter",
        'pulsar_txn_pending_ack_store_bufferedwriter_batch_records_count{broker="b1"} 12',
        'pulsar_txn_pending_ack_store_bufferedwriter_batch_records_sum{broker="b1"} 30',
        'pulsar_txn_tc_bufferedwriter_batch_records_count{broker="b1"} 5',
        *(
            f'pulsar_subscription_back_log{{topic="persistent://public/default/t-partition-{i}"}} {i}'
            for i in range(50)
        ),
        # a topic whose name holds the filter's word is no buffered-writer metric
        'pulsar_in_messages_total{topic="persistent://public/default/x_bufferedwriter_y"} 1',
    ]
)


def test_parse_with_only_keeps_just_the_lines_that_contain_it():
    everything = writer_metrics.parse(PAGE)
    writers = writer_metrics.parse(PAGE, only=writer_metrics.WRITER)
    assert len(everything) == 54
    assert [name for name, _, _ in writers] == [
        "pulsar_txn_pending_ack_store_bufferedwriter_batch_records_count",
        "pulsar_txn_pending_ack_store_bufferedwriter_batch_records_sum",
        "pulsar_txn_tc_bufferedwriter_batch_records_count",
        "pulsar_in_messages_total",
    ]


def test_summarize_counts_only_the_buffered_writers():
    summary = {s["log"]: s for s in writer_metrics.summarize(PAGE)}
    assert set(summary) == {"pending-ack", "tc"}
    assert (summary["pending-ack"]["batches"], summary["pending-ack"]["records"]) == (12, 30)
    assert summary["tc"]["batches"] == 5
