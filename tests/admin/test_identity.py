"""What the tool remembers is keyed by who the target says it is, not by the URL.

Real parts: the embedded engine served over real HTTP (engine/server.py) and reached through two
spellings of its address, and the stand-in broker (fakebroker.py) for a multi-cluster store.
The real multi-broker cluster test is tests/cluster/test_cluster.py (a second broker's URL).
"""

from __future__ import annotations

import json
import shutil

import pytest

from pulsar_txn_cli.engine.broker import Engine
from tests.conftest import assert_no_crash


@pytest.fixture
def served(tmp_path):
    from pulsar_txn_cli.engine import server

    engine = Engine.init(tmp_path / "engine", coordinators=2)
    srv = server.start(engine=engine)
    yield srv.url
    srv.close()
    engine.close()


def ok(result):
    assert result.exit_code == 0, result.stdout + result.stderr
    return result


def test_a_change_through_127_0_0_1_is_known_through_localhost(cli, served):
    assert served.startswith("http://127.0.0.1:")
    other = served.replace("127.0.0.1", "localhost")
    ok(cli(["set-txn-tc-batch-log", "--enable", "--reload", "--yes", "--admin-url", served]))
    data = ok(cli(["get-txn-tc-batch-log-stat", "--admin-url", other, "-o", "json"])).json()
    assert data["coodinatorArray"] == [{"0": True}, {"1": True}], data
    assert not any("outside pulsar-txn" in c["reason"] for c in data["coordinators"])
    assert data["identity"].startswith("engine ") and data["change"]["value"] is True


def test_a_change_not_yet_effective_is_judged_through_another_url(cli, served):
    ok(cli(["set-txn-tc-batch-log", "--enable", "--admin-url", served]))  # no reload: stores keep false
    with_url = ok(
        cli(["get-txn-tc-batch-log-stat", "--admin-url", served.replace("127.0.0.1", "localhost"), "-o", "json"])
    ).json()
    assert with_url["coodinatorArray"] == [{"0": False}, {"1": False}]
    assert "not reopened since the change" in with_url["coordinators"][0]["reason"]


def test_reset_then_init_is_a_new_engine_with_nothing_remembered(cli, tmp_path):
    engine = ["--engine-dir", str(tmp_path / "engine")]
    ok(cli(["engine", "init", "--coordinators", "2", *engine]))
    for switch in ("set-txn-tc-batch-log", "set-txn-pending-ack-batch-log"):
        ok(cli([switch, "--enable", "--reload", "--yes", *engine]))
    ok(cli(["engine", "simulate", "-n", "40", "--seed", "3", *engine]))
    check = cli(["downgrade", "check", *engine, "-o", "json"])
    assert check.json()["verdict"] == "BLOCKED"  # batching is on: a checkpoint with no ledger recorded yet
    listed = ok(cli(["state", "list", "-o", "json"])).json()
    assert sorted(r["kind"] for r in listed) == ["batch-log changes", "downgrade checkpoint"]
    reset = ok(cli(["engine", "reset", "--yes", *engine, "-o", "json"]))
    assert sorted(reset.json()["forgotten"]) == sorted(r["file"] for r in listed)
    assert "forgot 2 records about it" in reset.stderr
    assert ok(cli(["state", "list", "-o", "json"])).json() == []
    ok(cli(["engine", "init", "--coordinators", "2", *engine]))
    stat = ok(cli(["get-txn-tc-batch-log-stat", *engine, "-o", "json"])).json()
    assert stat["change"] is None
    assert not any("outside pulsar-txn" in c["reason"] for c in stat["coordinators"]), stat
    verdict = cli(["downgrade", "check", *engine, "-o", "json"])
    # A fresh engine never batched: its buffered-writer metrics counted no batch and each log's only
    # ledger is newer than them, so SAFE (a log that never batched); before the identity fix the old engine's record
    # made this BLOCKED ("changed again outside pulsar-txn").
    assert verdict.exit_code == 0 and verdict.json()["verdict"] == "SAFE", verdict.stdout + verdict.stderr
    assert not any("outside pulsar-txn" in p for p in verdict.json()["problems"])


def test_an_old_engine_record_never_reaches_a_new_engine_even_without_reset(cli, tmp_path):
    """Deleting the directory by hand (no `engine reset`) also gives a new identity."""
    import shutil

    engine = ["--engine-dir", str(tmp_path / "engine")]
    ok(cli(["engine", "init", "--coordinators", "1", *engine]))
    ok(cli(["set-txn-tc-batch-log", "--enable", "--reload", "--yes", *engine]))
    shutil.rmtree(tmp_path / "engine")
    ok(cli(["engine", "init", "--coordinators", "1", *engine]))
    stat = ok(cli(["get-txn-tc-batch-log-stat", *engine, "-o", "json"])).json()
    assert stat["change"] is None and stat["coodinatorArray"] == [{"0": False}]


def test_declaring_a_change_made_with_another_tool(cli, served):
    from pulsar_txn_cli.output.units import iso_millis

    # Another tool (pulsar-admin's REST call) turns batching on; nothing recorded it.
    import urllib.request

    urllib.request.urlopen(
        urllib.request.Request(
            f"{served}/admin/v2/brokers/configuration/transactionLogBatchedWriteEnabled/true", method="POST"
        )
    ).close()
    before = ok(cli(["get-txn-tc-batch-log-stat", "--admin-url", served, "-o", "json"])).json()
    assert before["coodinatorArray"] == [{"0": None}, {"1": None}]
    assert "outside pulsar-txn" in before["coordinators"][0]["reason"]
    opened = min(c["recoverStartTime"] for c in before["coordinators"])
    wrong = cli(["set-txn-tc-batch-log", "--disable", "--changed-at", str(opened), "--admin-url", served])
    assert wrong.exit_code == 2 and "not false" in wrong.stderr
    declared = ok(
        cli(
            [
                "set-txn-tc-batch-log",
                "--enable",
                "--changed-at",
                iso_millis(opened + 1),
                "--admin-url",
                served,
                "-o",
                "json",
            ]
        )
    ).json()
    assert declared["declared"] is True and declared["at"] == opened + 1
    after = ok(cli(["get-txn-tc-batch-log-stat", "--admin-url", served, "-o", "json"])).json()
    # Stores opened before the declared moment: the value before it is unknown, so still unknown,
    # but now for a reason an operator can act on; a reload makes them known.
    assert after["coodinatorArray"] == [{"0": None}, {"1": None}]
    assert "value before the change is unknown" in after["coordinators"][0]["reason"]
    urllib.request.urlopen(
        urllib.request.Request(
            f"{served}/admin/v2/persistent/pulsar/system/transaction_coordinator_assign-partition-0/unload",
            method="PUT",
        )
    ).close()
    reloaded = ok(cli(["get-txn-tc-batch-log-stat", "--admin-url", served, "-o", "json"])).json()
    assert reloaded["coodinatorArray"][0] == {"0": True} and reloaded["change"]["declared"] is True


@pytest.mark.parametrize(
    "value, message",
    [
        ("yesterday", "is not a time"),
        ("2999-01-01T00:00:00Z", "in the future"),
    ],
)
def test_changed_at_bad_input(cli, served, value, message):
    urlopen_set(served, "true")
    result = cli(["set-txn-tc-batch-log", "--enable", "--changed-at", value, "--admin-url", served])
    assert result.exit_code == 2 and message in result.stderr, result.stderr
    assert_no_crash(result)


def test_changed_at_does_not_go_with_reload(cli, served):
    result = cli(["set-txn-tc-batch-log", "--enable", "--reload", "--changed-at", "0", "--admin-url", served])
    assert result.exit_code == 2 and "--reload" in result.stderr


def urlopen_set(url: str, value: str) -> None:
    import urllib.request

    urllib.request.urlopen(
        urllib.request.Request(
            f"{url}/admin/v2/brokers/configuration/transactionLogBatchedWriteEnabled/{value}", method="POST"
        )
    ).close()


def test_state_prune_selects_what_to_forget(cli, served, tmp_path):
    ok(cli(["set-txn-tc-batch-log", "--enable", "--admin-url", served]))
    other = ["--engine-dir", str(tmp_path / "other")]
    ok(cli(["engine", "init", *other]))
    ok(cli(["set-txn-tc-batch-log", "--enable", *other]))
    rows = ok(cli(["state", "list", "-o", "json"])).json()
    assert len(rows) == 2 and all(r["identity"].startswith("engine ") for r in rows)
    assert any(served in " ".join(r["seenAs"]) for r in rows)
    assert cli(["state", "prune"]).exit_code == 2
    assert ok(cli(["state", "prune", "--older-than", "1", "-o", "json"])).json() == []
    gone = ok(cli(["state", "prune", "--current", *other, "-o", "json"])).json()
    assert len(gone) == 1 and all(served not in " ".join(r["seenAs"]) for r in gone)
    left = ok(cli(["state", "list", "-o", "json"])).json()
    assert len(left) == 1
    assert len(ok(cli(["state", "prune", left[0]["identity"], "-o", "json"])).json()) == 1
    assert "nothing remembered" in ok(cli(["state", "list"])).stdout


def test_several_clusters_in_the_store_use_the_brokers_own(cli):
    from tests.admin.fakebroker import FakeBroker

    with FakeBroker() as broker:
        broker.runtime["clusterName"] = "east"
        broker.extra_routes = [
            (r"/admin/v2/clusters", "GET", lambda: ["west", "east", "global"]),
            (r"/admin/v2/clusters/east", "GET", lambda: {"serviceUrl": "http://east-lb:8080"}),
            # only the own cluster's brokers are asked (west's would be another cluster's settings)
            (r"/admin/v2/brokers/east", "GET", lambda: [broker.url.split("://")[1]]),
        ]
        result = ok(cli(["get-txn-tc-batch-log-stat", "--admin-url", broker.url, "-o", "json"]))
    assert result.json()["identity"] == "cluster east (http://east-lb:8080)"


def test_the_checkpoint_of_a_cluster_is_found_through_any_of_its_urls(cli, served, tmp_path):
    first = cli(["downgrade", "check", "--admin-url", served, "-o", "json"])
    again = cli(["downgrade", "status", "--admin-url", served.replace("127.0.0.1", "localhost"), "-o", "json"])
    assert first.json()["checkpoint"] == ok(again).json()["checkpoint"]
    assert json.loads(open(first.json()["checkpoint"]).read())["target"] == first.json()["identity"]


def test_each_coordinator_is_judged_by_its_owning_brokers_configuration(cli):
    """Two stand-in brokers of one cluster whose broker.conf files disagree (no dynamic override)."""
    from tests.admin.fakebroker import FakeBroker

    with FakeBroker() as a, FakeBroker() as b:
        b.runtime["transactionLogBatchedWriteEnabled"] = "true"
        both = sorted(x.url.split("://")[1] for x in (a, b))
        a.extra_routes = [
            (r"/admin/v2/brokers/standalone", "GET", lambda: both),
            (
                r"/lookup/v2/topic/persistent/pulsar/system/transaction_coordinator_assign-partition-1",
                "GET",
                lambda: {"brokerUrl": "pulsar://127.0.0.1:6651", "httpUrl": b.url},
            ),
        ]
        stat = ok(cli(["get-txn-tc-batch-log-stat", "--admin-url", a.url, "-o", "json"])).json()
        metrics = ok(cli(["metrics", "--admin-url", a.url, "-o", "json"])).json()
    assert {x["broker"]: x["runtime"] for x in stat["brokers"]} == {a.url: False, b.url: True}
    assert stat["txnTcBatchLogEnabled"] is None  # the brokers disagree
    assert [(d["coordinatorId"], d["configured"], d["effective"]) for d in stat["coordinators"]] == [
        (0, False, False),
        (1, True, True),
    ]
    assert sorted({m["scraped"] for m in metrics}) == sorted(x.url for x in (a, b))


def test_a_copied_engine_directory_gets_an_identity_of_its_own(cli, tmp_path):
    """`cp -a` of an engine directory: the copy forgets the original's records on its first use (a new identity);
    the original keeps them, and so does an engine moved with `mv`."""
    original, copy, moved = tmp_path / "original", tmp_path / "copy", tmp_path / "moved"
    ok(cli(["engine", "init", "--coordinators", "2", "--engine-dir", original]))
    ok(cli(["set-txn-tc-batch-log", "--enable", "--reload", "--yes", "--engine-dir", original]))
    shutil.copytree(original, copy, symlinks=True)  # what `cp -a` does: every file, as it is

    def stat(directory):
        return ok(cli(["get-txn-tc-batch-log-stat", "--engine-dir", directory, "-o", "json"])).json()

    mine = stat(original)
    assert mine["change"]["value"] is True
    theirs = stat(copy)
    assert theirs["identity"] != mine["identity"] and theirs["change"] is None
    assert stat(original)["identity"] == mine["identity"]  # the original is not disturbed by its copy
    listed = {r["identity"] for r in ok(cli(["state", "list", "-o", "json"])).json()}
    assert listed == {mine["identity"]}  # nothing recorded for the copy, nothing of the original's shared
    shutil.rmtree(copy)
    original.rename(moved)
    assert stat(moved)["identity"] == mine["identity"] and stat(moved)["change"]["value"] is True
