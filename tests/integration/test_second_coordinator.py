"""Pulsar 5.0's second transaction coordinator (the scalable-topics one) on a real cluster, and the rollback.

One cluster (ZooKeeper, a bookie, one broker) starts on 4.2.4; its broker is rolled to 5.0.0-M1, where a 5.0
client begins transactions of both coordinators (scalable_client.py); then the broker is rolled back to 4.2.4
on the same metadata and bookie, as operators roll brokers. Asserted at each step: what the tool's commands say
of the transactions the admin API cannot see (`coordinators-list`, `coordinator-stats`, `slow-transactions`,
`transaction-metadata`, `find-hanging`, `abort-hanging`, `doctor`), what `upgrade check` and `downgrade check`
say, and what the rollback did (docs/real-broker-findings.md, docs/downgrade.md). The steps run in order on one
cluster (module scope); each test needs the one before it.
"""

from __future__ import annotations

import signal
import subprocess
import time

import pytest

from cluster import start_cluster
from scalable_client import ScalableRun, ids, read_all
from tool import Tool

pytestmark = pytest.mark.versions

OLD, FIVE = "4.2.4", "5.0.0-M1"
SETTING = "transactionCoordinatorScalableTopicsEnabled"
CLASSIC_T = "persistent://public/default/classic-t"
SCAL_T = "persistent://public/default/scal-t"
AFTER_T = "persistent://public/default/after-rollback-t"
# The scalable-topics coordinator sweeps timed-out transactions every minute by default; 5 s here, so its
# timeout is seen within the test (a 4.x broker ignores the unknown key).
CONF = {"transactionCoordinatorScalableTopicsTimeoutSweepIntervalSeconds": 5}
RUNS: dict[str, ScalableRun] = {}
LINES: dict[str, list[dict]] = {}
OBSERVED: dict[str, object] = {}
UNCOVERED = "scalable-topics transaction coordinator is on"


@pytest.fixture(scope="module")
def cluster():
    try:
        started = start_cluster(version=OLD, brokers=1, coordinators=1, name="second-tc", extra_conf=CONF)
    except Exception as exc:  # noqa: BLE001 - a cluster that cannot start fails the tests, never skips
        pytest.fail(f"could not start a {OLD} cluster:\n{exc}", pytrace=False)
    yield started
    for run in RUNS.values():
        run.kill()
    print("\nsecond coordinator, observed:", OBSERVED)
    started.cleanup()


@pytest.fixture(scope="module")
def tool(cluster, tmp_path_factory):
    return Tool(cluster.admin_url, tmp_path_factory.mktemp("state"))


def broker_row(tool) -> dict:
    report = tool.json("upgrade", "check", expect=None)
    return report, report["brokers"][0]


def test_upgrade_check_knows_the_setting_before_and_after_the_roll_to_5_0(cluster, tool):
    _, row = broker_row(tool)
    assert row["version"] == OLD and row[SETTING] is None  # 4.2.4 has no such setting
    t0 = time.monotonic()
    cluster.restart_broker(0, version=FIVE)
    cluster.wait_coordinators_ready()
    OBSERVED["rollTo5Seconds"] = round(time.monotonic() - t0, 1)
    report, row = broker_row(tool)
    assert row["version"] == FIVE and row[SETTING] is True, row  # on by default in 5.0.0-M1
    # Everything it needs holds: the classic coordinator on, 5.0's dispatching buffer and pending-ack providers.
    assert not [p for p in report["problems"] if "scalable" in p.lower()], report["problems"]


def test_a_5_0_client_begins_transactions_of_both_coordinators(cluster):
    url = cluster.brokers[0].service_url
    RUNS["classic"] = ScalableRun(url, CLASSIC_T, scalable=False, committed=1, held=1)
    LINES["classic"] = RUNS["classic"].wait_holding()
    RUNS["scalable"] = ScalableRun(url, SCAL_T, scalable=True, committed=2, held=1)
    LINES["scalable"] = RUNS["scalable"].wait_holding()
    classic, scalable = (
        ids(LINES["classic"], "open") + ids(LINES["classic"], "committed"),
        ids(LINES["scalable"], "open"),
    )
    OBSERVED["classicIds"], OBSERVED["scalableIds"] = classic, scalable + ids(LINES["scalable"], "committed")
    assert all(i.startswith("0:") for i in classic), classic  # the classic coordinator 0's
    assert len(ids(LINES["scalable"], "committed")) == 2 and len(scalable) == 1


def test_the_admin_api_commands_say_what_they_leave_out(cluster, tool):
    held = ids(LINES["classic"], "open")[0]
    for command in ("coordinators-list", "coordinator-stats", "slow-transactions"):
        result = tool.run(command)
        assert UNCOVERED in result.stderr, (command, result.stderr)
        # The buffers count the scalable client's 3 transactions on scal-t: its 2 commits never reached it.
        assert "count 3 open transaction(s) on 1 topic(s) that no classic coordinator lists" in result.stderr
        assert SCAL_T in result.stderr
    listed = tool.json("slow-transactions")  # Pulsar's answer: txn id -> its metadata
    assert [t["txnId"] for t in listed.values()] == [f"({held.replace(':', ',')})"], listed
    most, least = ids(LINES["scalable"], "open")[0].split(":")
    if most != "0":  # an id no classic coordinator can have
        result = tool.run("transaction-metadata", f"({most},{least})", expect=4)
        assert "scalable-topics coordinator" in result.stderr and "cannot look up" in result.stderr, result.stderr
    found = tool.json("find-hanging", "--older-than", "1s")
    assert [t["txnId"] for t in found["transactions"]] == [f"({held.replace(':', ',')})"], found
    second = found["secondCoordinator"]
    assert second["uncoveredTransactionsCounted"] == 3 and second["byTopic"] == {SCAL_T: 3}, second


def test_the_doctor_names_the_readers_they_hold(cluster, tool):
    report = tool.json("doctor", "--older-than", "1s", expect=6)
    by_check = {(f["check"], f["subject"]) for f in report["findings"]}
    assert ("second-coordinator", SCAL_T) in by_check, report["findings"]
    assert ("phantom-fence", SCAL_T) not in by_check  # the transactions exist: they are the other coordinator's
    held = "(" + ids(LINES["classic"], "open")[0].replace(":", ",") + ")"
    hanging = [f for f in report["findings"] if f["check"] == "hanging-transaction"]
    assert [f["txnIds"] for f in hanging] == [[held]], hanging  # the classic one, found as on 4.x
    finding = next(f for f in report["findings"] if f["check"] == "second-coordinator")
    assert "3 open transaction(s)" in finding["summary"] and "readers wait" in finding["summary"], finding
    check = next(c for c in report["checks"] if c["check"] == "second-coordinator")
    assert check["ran"] and UNCOVERED in check["why"], check
    text = tool.run("doctor", "--older-than", "1s", expect=6).stdout
    assert "not covered: Pulsar 5.0's scalable-topics transaction coordinator is on" in text


def test_their_commits_never_reach_a_persistent_topic(cluster):
    url = cluster.brokers[0].service_url
    classic, scalable = read_all(url, CLASSIC_T), read_all(url, SCAL_T)
    OBSERVED["readableOn5"] = {"classic-t": classic, "scal-t": scalable}
    assert classic == ["c-0"], classic
    # 5.0.0-M1: the scalable-topics coordinator's commits write no marker into a persistent:// topic, so
    # its buffer still counts them open and readers stop before their messages.
    assert scalable == [], scalable
    time.sleep(12)  # past two timeout sweeps
    status, stats = cluster.rest("GET", "/admin/v3/transactions/transactionBufferStats/public/default/scal-t")
    OBSERVED["scalBufferOn5"] = stats
    assert status == 200 and stats["ongoingTxnSize"] == 3, stats


def test_abort_hanging_ends_the_classic_one_and_says_what_is_left(cluster, tool):
    done = tool.json("abort-hanging", "--older-than", "1s", "--execute", "--yes")
    assert [r["txnId"] for r in done["results"] if r["aborted"]] == [
        "(" + ids(LINES["classic"], "open")[0].replace(":", ",") + ")"
    ], done
    assert done["secondCoordinator"]["uncoveredTransactionsCounted"] == 3, done["secondCoordinator"]
    result = tool.run("find-hanging", "--older-than", "1s")
    assert "0 hanging transactions on " in result.stdout
    assert "not covered:" in result.stdout and "count 3 open transaction(s)" in result.stdout, result.stdout


def test_downgrade_check_on_5_0_says_what_a_rollback_leaves(tool):
    report = tool.json("downgrade", "check", expect=None)
    OBSERVED["downgradeCheckOn5"] = {"verdict": report["verdict"], "secondCoordinator": report.get("secondCoordinator")}
    # No log was ever batched (PIP-160's part is clear), but a rollback would keep the 3 open for good: BLOCKED.
    assert report["verdict"] == "BLOCKED" and all(i["clear"] for i in report["coordinators"]), report
    assert any(p.startswith("the buffers count 3 open transaction(s) of Pulsar 5.0's") for p in report["problems"])
    second = report["secondCoordinator"]
    assert second["uncoveredTransactionsCounted"] == 3 and second["byTopic"] == {SCAL_T: 3}, second
    assert len(second["rollback"]) == 2 and "stays open there for good" in second["rollback"][0], second
    text = tool.run("downgrade", "check", expect=6).stdout
    assert "rollback to 4.x: the buffers count 3 open transaction(s)" in text, text


def metadata_children(cluster, path: str) -> str:
    """`ls PATH` in the cluster's ZooKeeper (its own line's ZooKeeperMain)."""
    cmd = [
        "java",
        "-cp",
        cluster.classpath,
        "org.apache.zookeeper.ZooKeeperMain",
        "-server",
        f"127.0.0.1:{cluster.zk_port}",
    ]
    out = subprocess.run([*cmd, "ls", path], capture_output=True, text=True, timeout=60)
    return next((line for line in out.stdout.splitlines() if line.startswith("[")), out.stdout[-300:])


def test_rolled_back_to_4_2_4_on_the_same_metadata_and_bookie(cluster, tool):
    for run in RUNS.values():
        run.kill()  # a client left running across a rollback; its open transaction stays open
    OBSERVED["txnRecordsOn5"] = metadata_children(cluster, "/txn/id")
    t0 = time.monotonic()
    cluster.brokers[0].proc.kill(signal.SIGTERM)
    # On a loaded machine the 5.0 broker's clean stop can outlast its 40 s and end in SIGKILL; its ZooKeeper
    # session (20 s) then keeps its locks, and 4.2.4 exits at start with LockBusyException: wait it out.
    time.sleep(25)
    cluster.start_broker(0, version=OLD)
    cluster.wait_coordinators_ready()  # the classic coordinator loads its log, written by 5.0
    OBSERVED["rollbackSeconds"] = round(time.monotonic() - t0, 1)
    assert cluster.brokers[0].rest("GET", "/admin/v2/brokers/version") == (200, OLD)
    url = cluster.brokers[0].service_url
    OBSERVED["readableOn4"] = {"classic-t": read_all(url, CLASSIC_T), "scal-t": read_all(url, SCAL_T)}
    OBSERVED["classicBufferOn4"] = cluster.rest(
        "GET", "/admin/v3/transactions/transactionBufferStats/public/default/classic-t"
    )[1]
    assert OBSERVED["readableOn4"] == {"classic-t": ["c-0"], "scal-t": []}, OBSERVED
    status, stats = cluster.rest("GET", "/admin/v3/transactions/transactionBufferStats/public/default/scal-t")
    OBSERVED["scalBufferOn4"] = stats
    # 4.2.4 recovers the scalable-topics coordinator's transactions from the topic's ledger, as open ones.
    assert status == 200 and stats["ongoingTxnSize"] == 3, stats
    OBSERVED["txnRecordsOn4"] = metadata_children(cluster, "/txn/id")
    records = OBSERVED["txnRecordsOn4"]
    assert records == OBSERVED["txnRecordsOn5"] and records.startswith("[") and records != "[]", OBSERVED  # left
    fresh = ScalableRun(url, AFTER_T, scalable=False, committed=2, held=0)
    RUNS["after"] = fresh
    fresh.wait_holding()
    OBSERVED["newClassicOn4"] = fresh.finish()
    assert len(ids(OBSERVED["newClassicOn4"], "committed")) == 2, OBSERVED["newClassicOn4"]
    assert read_all(url, AFTER_T) == ["c-0", "c-1"]
    doctor = tool.json("doctor", "--older-than", "1s", expect=None)
    OBSERVED["doctorOn4"] = [(f["check"], f["subject"], f["severity"]) for f in doctor["findings"]]
    # No coordinator of 4.2.4 lists them: a phantom fence with the buffer still counting 3.
    assert ("phantom-fence", SCAL_T, "warning") in OBSERVED["doctorOn4"], doctor["findings"]
    after = tool.json("downgrade", "check", expect=None)
    OBSERVED["downgradeCheckOn4"] = after["verdict"]
    assert after["verdict"] == "SAFE" and "secondCoordinator" not in after, after
