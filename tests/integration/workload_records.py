"""What the harness's TxnWorkload printed, read back: the messages a subscription received, the values each
transaction outcome produced, and the partitions an open transaction wrote to."""

from __future__ import annotations


def base(topic: str) -> str:
    """A partition's topic (a non-partitioned topic is its own)."""
    return topic.split("-partition-")[0]


def received(broker, sub: str, **workload) -> dict[str, list[str]]:
    """base topic -> the values a new subscription SUB on BROKER receives, in order (WORKLOAD: the
    workload's options, its prefix and namespace)."""
    got: dict[str, list[str]] = {}
    for line in broker.run_workload(dump=sub, **workload):
        if line.get("event") == "msg":
            got.setdefault(base(line["topic"]), []).append(line["value"])
    return got


def produced(lines, outcome) -> dict[str, set[str]]:
    """topic -> the values produced by the transactions with that outcome."""
    out: dict[str, set[str]] = {}
    for record in lines:
        if record.get("event") == "txn" and record.get("outcome") == outcome:
            for op in record["ops"]:
                if op["op"] == "produce":
                    out.setdefault(op["topic"], set()).add(op["value"])
    return out


def open_partitions(lines) -> set[str]:
    """The partitions the open transaction wrote to (a non-partitioned topic is its own)."""
    found = set()
    for record in lines:
        if record.get("event") == "txn" and record.get("outcome") == "open":
            for op in record["ops"]:
                if op["op"] == "produce":
                    index = int(op["msgId"].split(":")[2])
                    found.add(f"{op['topic']}-partition-{index}" if index >= 0 else op["topic"])
    return found
