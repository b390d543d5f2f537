"""Every admin command against the engine through both backends, requiring identical JSON.

In process (--engine-dir: the engine's router called directly) and over HTTP (--admin-url to
engine/server.py serving the same engine directory on 127.0.0.1, port 0).
"""

import re
import shutil

import pytest

from pulsar_txn_cli.engine import server  # noqa: E402
from tests.conftest import simulate_into

# A value of each declared option (calls.py) in this engine's world: every declared GET call is
# read with them (declared_reads), so a new pulsar-admin command is compared with no edit here.
EXAMPLES = {
    "topic": "sim-topic-0",
    "subscription": "sim-sub-0",
    "coordinator_id": "0",
    "most": "0",
    "least": "1",
    "ledger_id": "1",
    "entry_id": "0",
}
# declared GET calls not read with EXAMPLES, and why
NOT_READ = {"transaction-metadata": "no transaction of this world stays open: FAILING_COMMANDS and the abort test"}


def declared_reads() -> list[list[str]]:
    """Every declared GET call with EXAMPLES' values for its options (its first flag each)."""
    from pulsar_txn_cli.calls import COMMANDS, REQUIRED

    reads = []
    for call in COMMANDS:
        if call.method != "GET" or call.name in NOT_READ:
            continue
        missing = [p.name for p in call.params if p.default is REQUIRED and p.name not in EXAMPLES]
        assert not missing, f"{call.name}: add an example value of {missing} to EXAMPLES (or to NOT_READ, why)"
        reads.append(
            [
                call.name,
                *(a for p in call.params if p.flags and p.name in EXAMPLES for a in (p.flags[0], EXAMPLES[p.name])),
            ]
        )
    return reads


# the variants of the declared reads that take flags, and the commands that are no declared call
MORE_READS = [
    ["coordinator-stats"],
    ["coordinator-stats", "-c", "1"],
    ["coordinator-internal-stats", "-c", "1", "-m"],
    ["pending-ack-stats", "-t", "sim-topic-0", "-s", "sim-sub-0", "-l"],
    ["pending-ack-internal-stats", "-t", "persistent://public/default/sim-topic-1", "-s", "sim-sub-1"],
    ["slow-transactions", "-t", "0s"],
    ["subscriptions"],
    ["get-txn-tc-batch-log-stat"],
    ["get-txn-pending-ack-batch-log-stat"],
    ["metrics"],
    ["position-stats-in-pending-ack", "-t", "sim-topic-0", "-s", "sim-sub-0", "-l", "1", "-e", "0", "-b", "0"],
]
DECLARED_READS = declared_reads()
READ_COMMANDS = DECLARED_READS + [args for args in MORE_READS if args not in DECLARED_READS]
FAILING_COMMANDS = [
    ["coordinator-stats", "-c", "9"],
    ["transaction-metadata", "(0,999999)"],
    ["pending-ack-stats", "-t", "sim-topic-0", "-s", "no-such-sub"],
]


@pytest.fixture(scope="module")
def engine_dir(tmp_path_factory):
    return simulate_into(
        tmp_path_factory.mktemp("engine") / "engine",
        coordinators=2,
        transactions=40,
        concurrency=4,
        topics=2,
        subscriptions=2,
        seed=7,
    )


def without_local_fields(value):
    """Drop what differs by design: the target's description and this machine's clock."""
    if isinstance(value, dict):
        return {k: without_local_fields(v) for k, v in value.items() if k not in ("target", "at", "scraped")}
    if isinstance(value, list):
        return [without_local_fields(v) for v in value]
    if isinstance(value, str):
        return re.sub(r"\d{4}-\d\d-\d\dT[\d:.]+Z", "<time>", value)
    return value


def both(cli, directory, args):
    local = cli([*args, "--engine-dir", str(directory), "-o", "json"])
    with server.start(str(directory)) as served:
        remote = cli([*args, "--admin-url", served.url, "-o", "json"])
    # suggested commands carry their target's flags (cli/advice.py): those differ too
    local.stderr = local.stderr.replace(f"--engine-dir {directory}", "<flags>").replace(
        f"engine {directory}", "<target>"
    )
    remote.stderr = remote.stderr.replace(f"--admin-url {served.url}", "<flags>").replace(
        f"cluster {served.url}", "<target>"
    )
    return local, remote


@pytest.mark.parametrize("args", READ_COMMANDS, ids=" ".join)
def test_read_commands_agree(cli, engine_dir, args):
    local, remote = both(cli, engine_dir, args)
    assert local.exit_code == 0, local.stderr
    assert remote.exit_code == 0, remote.stderr
    assert without_local_fields(local.json()) == without_local_fields(remote.json())
    assert local.stderr.startswith("target: <target>") and remote.stderr.startswith("target: <target>")


@pytest.mark.parametrize("args", FAILING_COMMANDS, ids=" ".join)
def test_failures_agree(cli, engine_dir, args):
    local, remote = both(cli, engine_dir, args)
    assert local.exit_code == remote.exit_code == 4, (local.stderr, remote.stderr)
    assert "error:" in local.stderr
    assert local.stderr == remote.stderr  # the same sentence, the target aside


def test_subscriptions_found(cli, engine_dir):
    data = cli(["subscriptions", "--engine-dir", str(engine_dir), "-o", "json"]).json()
    assert {(d["topic"], d["subscription"], d["status"]) for d in data} == {
        ("persistent://public/default/sim-topic-0", "sim-sub-0", "ok"),
        ("persistent://public/default/sim-topic-1", "sim-sub-1", "ok"),
    }


@pytest.mark.parametrize("log", ["tc", "pending-ack"])
def test_set_reload_stat_agree(cli, engine_dir, tmp_path, log):
    """The same sequence on two copies of the engine, one per backend, ends in the same judgement."""

    def sequence(target, state):
        # Each copy is an engine of its own (a copied directory gets its own identity on first use), with its
        # own records; a state directory each keeps it so even if that rule broke.
        steps = [
            [f"set-txn-{log}-batch-log", "--enable"],
            [f"get-txn-{log}-batch-log-stat"],
            [f"set-txn-{log}-batch-log", "--enable", "--reload", "--yes"],
            [f"get-txn-{log}-batch-log-stat"],
        ]
        outputs = [cli([*step, *target, "-o", "json"], env={"XDG_STATE_HOME": str(state)}) for step in steps]
        for output in outputs:
            assert output.exit_code == 0, output.stderr
        return [{k: v for k, v in without_local_fields(output.json()).items() if k != "identity"} for output in outputs]

    for backend in ("engine", "http"):
        shutil.copytree(engine_dir, tmp_path / backend)
    results = [sequence(["--engine-dir", str(tmp_path / "engine")], tmp_path / "engine-state")]
    with server.start(str(tmp_path / "http")) as served:  # one server: the target (and its state file) stays the same
        results.append(sequence(["--admin-url", served.url], tmp_path / "http-state"))
    assert results[0] == results[1]
    flag, array = (
        ("txnTcBatchLogEnabled", "coodinatorArray")
        if log == "tc"
        else ("txnPendingAckBatchLogEnabled", "subscriptionArray")
    )
    before_reload, after_reload = results[0][1], results[0][3]
    assert before_reload[flag] is True and after_reload[flag] is True
    assert all(v is False for item in before_reload[array] for v in item.values())
    assert after_reload[array] and all(v is True for item in after_reload[array] for v in item.values())


def test_every_command_renders_table_and_jsonl(cli, engine_dir):
    for args in READ_COMMANDS:
        for fmt in ("table", "jsonl"):
            result = cli([*args, "--engine-dir", str(engine_dir), "-o", fmt])
            assert result.exit_code == 0, (args, fmt, result.stderr)
            if fmt == "jsonl":
                assert all(isinstance(line, dict) for line in result.jsonl()), args
            else:
                assert result.stdout.strip(), args


def test_abort_transaction_asks_first_and_aborts(cli, tmp_path):
    """abort-transaction refuses without --yes when stdin is not a terminal, then aborts on the engine."""
    engine = str(tmp_path / "engine")
    assert cli(["engine", "init", "--engine-dir", engine]).exit_code == 0
    from pulsar_txn_cli.engine.broker import Engine

    got = []
    with Engine.open(engine) as opened:
        opened.tc(0).new_transaction(60_000, got.append)
        opened.checkpoint()
    most, least = 0, got[0]
    refused = cli(["abort-transaction", f"({most},{least})", "--engine-dir", engine])
    assert refused.exit_code == 2 and "--yes" in refused.stderr
    assert (
        cli(["transaction-metadata", f"({most},{least})", "--engine-dir", engine, "-o", "json"]).json()["status"]
        == "OPEN"
    )
    done = cli(["abort-transaction", "-m", most, "-l", least, "--yes", "--engine-dir", engine, "-o", "json"])
    assert done.exit_code == 0, done.stderr
    assert done.json()["aborted"] is True
    after = cli(["transaction-metadata", f"({most},{least})", "--engine-dir", engine, "-o", "json"])
    assert after.exit_code != 0 or after.json()["status"] in ("ABORTING", "ABORTED")


def test_batch_log_reasons_read_the_engines_own_clock(cli, tmp_path):
    """The change is recorded in the target's time, the time its stores' recoverStartTime uses:
    on the engine that is its virtual clock, so the reason's two moments are in order."""
    target = ["--engine-dir", str(tmp_path / "engine")]
    assert cli(["engine", "init", *target]).exit_code == 0
    assert cli(["set-txn-tc-batch-log", "--enable", *target]).exit_code == 0
    waiting = cli(["get-txn-tc-batch-log-stat", "-o", "json", *target]).json()["coordinators"][0]["reason"]
    assert cli(["set-txn-tc-batch-log", "--enable", "--reload", "--yes", *target]).exit_code == 0
    reopened = cli(["get-txn-tc-batch-log-stat", "-o", "json", *target]).json()["coordinators"][0]["reason"]
    assert "not reopened since the change" in waiting
    opened_at, changed_at = re.search(r"reopened \(at (\S+)\) after the change at (\S+)$", reopened).groups()
    assert changed_at <= opened_at and changed_at.startswith("2026-01-01")  # the engine's epoch, not today


def test_scale_transaction_coordinators_grows_and_never_shrinks(cli, tmp_path):
    """pulsar-admin's scale-transactionCoordinators -r, on both backends."""
    import contextlib

    for backend in ("engine", "http"):
        directory = tmp_path / backend
        assert cli(["engine", "init", "--coordinators", "2", "--engine-dir", directory]).exit_code == 0
        with server.start(str(directory)) if backend == "http" else contextlib.nullcontext() as served:
            target = ["--engine-dir", str(directory)] if backend == "engine" else ["--admin-url", served.url]
            refused = cli(["scale-transactionCoordinators", "-r", "3", *target])
            assert refused.exit_code == 2 and "--yes" in refused.stderr  # asks first: it cannot be undone
            grown = cli(["scale-transactionCoordinators", "--replicas", "3", "--yes", *target, "-o", "json"])
            assert grown.exit_code == 0, grown.stderr
            assert (grown.json()["previous"], grown.json()["replicas"]) == (2, 3)
            shrink = cli(["scale-transactionCoordinators", "-r", "2", "--yes", *target])
            assert shrink.exit_code == 4 and "(406)" in shrink.stderr and "can only grow" in shrink.stderr
            listed = cli(["coordinators-list", *target, "-o", "json"]).json()
            assert sorted(c["id"] for c in listed) == [0, 1, 2]
            assert cli(["coordinator-stats", "-c", "2", *target, "-o", "json"]).json()["state"] == "Ready"
