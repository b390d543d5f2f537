"""Every REST request through PulsarAdmin: Pulsar's paths written in protocol.py only, what several
readers ask made by one method each, and one request count with one meaning (requests sent to the target)
for doctor and the downgrade check alike. On the embedded engine in process, its real router behind a
transport that records what reaches it."""

from __future__ import annotations

import re

import pytest

import pulsar_txn_cli
from pulsar_txn_cli import calls
from pulsar_txn_cli.admin.client import PulsarAdmin
from pulsar_txn_cli.admin.counting import counted, requests_sent
from pulsar_txn_cli.engine.transport import EngineTransport
from pulsar_txn_cli.errors import ConnectionFailed, DataError, attempt, describe
from pulsar_txn_cli.target.settings import Target
from tests.conftest import isolate, simulate_into

TOPIC = "persistent://public/default/sim-topic-0"
PACKAGE = __import__("pathlib").Path(pulsar_txn_cli.__file__).parent


@pytest.fixture(autouse=True)
def _isolated(monkeypatch, tmp_path):
    isolate(monkeypatch, tmp_path)


class Recording:
    """The engine's transport, recording every request that reaches it (method, path without the query)."""

    def __init__(self, transport):
        self._transport = transport
        self.seen: list[tuple[str, str]] = []

    def request(self, method, path, *args, **kwargs):
        self.seen.append((method, path.split("?", 1)[0]))
        return self._transport.request(method, path, *args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._transport, name)


@pytest.fixture()
def engine_admin(tmp_path):
    directory = simulate_into(tmp_path / "engine", coordinators=2, transactions=40, topics=2, partitions=2, seed=7)
    target = Target(kind="engine", engine_dir=directory)
    recording = Recording(EngineTransport(target))
    admin = PulsarAdmin(recording, target)
    yield admin, recording
    admin.close()


def test_no_module_but_protocol_writes_a_rest_path():
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "protocol.py" and path.parent == PACKAGE:
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if re.search(r"/admin/v\d|/lookup/v\d", line):
                found.append(f"{path.relative_to(PACKAGE)}:{number}: {line.strip()}")
    assert not found, "REST paths written outside protocol.py:\n" + "\n".join(found)


def test_a_partitions_internal_stats_come_before_its_buffers_and_one_failure_raises(engine_admin):
    admin, recording = engine_admin
    partition = f"{TOPIC}-partition-0"
    internal, stats = admin.partition_stats(partition, low_water_marks=True)
    assert [p for _, p in recording.seen] == [
        "/admin/v2/persistent/public/default/sim-topic-0-partition-0/internalStats",
        "/admin/v3/transactions/transactionBufferStats/public/default/sim-topic-0-partition-0",
    ]
    assert internal["lastConfirmedEntry"] and stats["state"] == "Ready" and "lowWaterMarks" in stats
    with pytest.raises(ConnectionFailed) as failed:  # both fail: the buffer's failure is the one raised
        admin.partition_stats("persistent://public/default/nope")
    assert "transactionBufferStats" in str(failed.value) and failed.value.status == 404


def test_a_topics_partitions_are_one_method(engine_admin):
    admin, recording = engine_admin
    assert admin.topic_partitions(TOPIC) == [f"{TOPIC}-partition-0", f"{TOPIC}-partition-1"]
    assert admin.topic_partitions(f"{TOPIC}-partition-1") == [f"{TOPIC}-partition-1"]  # not partitioned itself
    assert recording.seen[0] == ("GET", "/admin/v2/persistent/public/default/sim-topic-0/partitions")


def test_doctor_and_the_downgrade_check_count_the_requests_sent(engine_admin, tmp_path):
    from pulsar_txn_cli.doctor.read import Scope
    from pulsar_txn_cli.doctor.run import run
    from pulsar_txn_cli.downgrade import runner

    admin, recording = engine_admin
    report = run(admin, Scope(), downgrade_state=False)
    assert report.requests == len(recording.seen) > 10
    recording.seen.clear()
    result = runner.check(admin, tmp_path / "checkpoint.json", concurrency=4)
    assert result.requests == len(recording.seen) > 10
    # counting an admin twice counts once; one not counted has sent none that were counted
    twice = counted(counted(admin))
    twice.tenants()
    assert requests_sent(twice) == 1 and requests_sent(admin) == 0


def test_evidence_names_the_request_a_declaration_makes():
    assert calls.COORDINATOR_STATS.request_line(coordinator_id=0) == (
        "GET /admin/v3/transactions/coordinatorStats?coordinatorId=0"  # 0 is a value, not an unset flag
    )
    assert calls.COORDINATOR_INTERNAL_STATS.request_line(coordinator_id=0) == (
        "GET /admin/v3/transactions/coordinatorInternalStats/0"  # metadata=false, the default: not shown
    )
    assert calls.PENDING_ACK_INTERNAL_STATS.request_line(topic="t", subscription="s b", metadata=True) == (
        "GET /admin/v3/transactions/pendingAckInternalStats/public/default/t/s%20b?metadata=true"
    )


def test_a_failure_kept_as_a_sentence():
    assert attempt(int, "12") == (12, None)
    assert attempt(int, "x") == (None, "unexpected ValueError: invalid literal for int() with base 10: 'x'")
    assert describe(DataError("the dump is empty")) == "the dump is empty"
