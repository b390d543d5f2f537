"""`downgrade check --confirm-from-bookies` on the embedded engine (its store stands in for the bookies),
and the rule that applies what was read to a finished verdict (downgrade/confirm.py).

The bookies' path (BookKeeper's shell, a served engine as the cluster) is tested in
tests/collect/test_scan.py, and on a real cluster in tests/integration/test_real_downgrade.py."""

from __future__ import annotations

import json

import pytest

from tests.conftest import assert_no_crash, isolate, simulate_into

from pulsar_txn_cli.codec import is_batched
from pulsar_txn_cli.codec.framing import encode_batch_serialized
from pulsar_txn_cli.downgrade.confirm import CAUSE_BATCHED_FOUND, LedgerRead, Reading, apply_confirmation
from pulsar_txn_cli.downgrade.verdict import BLOCKED, SAFE, WAIT, DowngradeVerdict, ItemVerdict
from pulsar_txn_cli.engine.broker import Engine

from tests.downgrade.builders import sub, tc

SWITCHES = ("set-txn-tc-batch-log", "set-txn-pending-ack-batch-log")


@pytest.fixture(autouse=True)
def isolated(monkeypatch, tmp_path):
    isolate(monkeypatch, tmp_path)


def check(cli, directory, *extra, checkpoint=None):
    args = ["downgrade", "check", "--engine-dir", directory, "-o", "json", *extra]
    if checkpoint:
        args += ["--checkpoint", checkpoint]
    result = cli(args)
    assert result.exit_code in (0, 5, 6), result.stderr
    return result.exit_code, json.loads(result.stdout)


def stored_batched(directory) -> dict[tuple[str, int], list[int]]:
    """{(managed ledger, ledger id): batched entry ids} of every transaction log, as `engine dump` reads them."""
    from pulsar_txn_cli.engine import dump

    engine = Engine.open(directory)
    try:
        found: dict = {}
        for line in dump.lines(engine, dump.select(engine, None, "all"), dump.dump_object):
            if is_batched(__import__("base64").b64decode(line["data"])):
                found.setdefault((line["managedLedger"], line["ledgerId"]), []).append(line["entryId"])
        return found
    finally:
        engine.close()


def inject_batched_entry(directory) -> tuple[str, int, int]:
    """Append to coordinator 0's current ledger the batched form of its last record, straight into the
    engine's store: bytes on the "bookies" that no ledger id accounts for (a stand-in for a batching
    writer the checkpoint did not see; the engine's own switches cannot make one once the ids are right)."""
    engine = Engine.open(directory)
    try:
        ml = engine.managed_ledger(engine.tc_log_names()[0])
        *_, (_, _, data) = ml.read_all()
        with engine.store.tx():
            [(ledger_id, entry_id)] = ml.add_entries([encode_batch_serialized([bytes(data)])])
        return ml.name, ledger_id, entry_id
    finally:
        engine.close()


def test_a_batched_entry_the_ledger_ids_do_not_show_turns_safe_into_blocked(cli, tmp_path):
    directory = simulate_into(tmp_path / "engine", coordinators=2, transactions=50, topics=1, subscriptions=2, seed=4)
    checkpoint = tmp_path / "cp.json"
    code, clean = check(cli, directory, "--confirm-from-bookies", checkpoint=checkpoint)
    assert (code, clean["verdict"]) == (0, SAFE), clean["problems"]
    assert clean["confirmation"]["batchedEntries"] == 0 and clean["confirmation"]["ledgers"] >= 4

    name, ledger_id, entry_id = inject_batched_entry(directory)
    code, plain = check(cli, directory, checkpoint=checkpoint)
    assert plain["verdict"] == SAFE  # the ids cannot see it: what the confirmation is for
    assert "confirmation" not in plain

    code, confirmed = check(cli, directory, "--confirm-from-bookies", checkpoint=checkpoint)
    assert (code, confirmed["verdict"]) == (6, BLOCKED)
    assert confirmed["confirmation"]["batchedLedgers"] == [
        {"managedLedger": name, "ledgerId": ledger_id, "batchedEntries": 1, "entryIds": [entry_id]}
    ]
    [held] = [c for c in confirmed["coordinators"] if not c["clear"]]
    assert (held["coordinatorId"], held["cause"]) == (0, CAUSE_BATCHED_FOUND)
    assert f"coordinator 0: ledger {ledger_id} holds 1 batched entry (entry {entry_id})" in confirmed["problems"]
    assert any(f.startswith("pulsar-txn downgrade reset") for f in confirmed["fixes"])


def test_the_terminal_output_names_the_ledgers_and_what_was_read(cli, tmp_path):
    directory = simulate_into(tmp_path / "engine", coordinators=2, transactions=50, topics=1, subscriptions=2, seed=4)
    assert cli(["downgrade", "check", "--engine-dir", directory]).exit_code == 0
    _, ledger_id, entry_id = inject_batched_entry(directory)
    result = cli(["downgrade", "check", "--engine-dir", directory, "--confirm-from-bookies"])
    assert result.exit_code == 6
    lines = result.stdout.splitlines()
    assert f"problem: coordinator 0: ledger {ledger_id} holds 1 batched entry (entry {entry_id})" in lines
    assert any(
        line.startswith("confirmation: read ") and line.endswith("from the engine's store: 1 batched entry in 1 ledger")
        for line in lines
    ), lines
    assert lines[-1].startswith("BLOCKED: ") and "1 remaining ledger holds batched entries" in lines[-1]


def test_batching_back_on_after_the_record_is_never_safe_when_confirmed(cli, tmp_path):
    """The trial's walk: batching off, a check records, batching on again, off again, traffic; every
    confirmed check says SAFE only when the store holds no batched entry, and names what it found."""
    directory = tmp_path / "engine"
    Engine.init(directory, coordinators=4).close()
    where = ["--engine-dir", directory]

    def switch(state: str) -> None:
        for name in SWITCHES:
            assert cli([name, f"--{state}", "--reload", "--yes", "--force", *where]).exit_code == 0  # past the guards

    def traffic(n: int, seed: int) -> None:
        assert cli(["engine", "simulate", "-n", n, "--seed", seed, *where]).exit_code == 0

    switch("enable")
    traffic(2000, 1)
    switch("disable")
    check(cli, directory)  # records the last batched ledgers
    traffic(3000, 2)
    switch("enable")
    traffic(500, 3)
    switch("disable")
    verdicts = []
    for seed in (11, 12, 13):
        traffic(300, seed)
        code, seen = check(cli, directory, "--confirm-from-bookies")
        stored = stored_batched(directory)
        verdicts.append(seen["verdict"])
        assert not (seen["verdict"] == SAFE and stored), (seen["verdict"], sorted(stored))
        if "confirmation" in seen:  # the ids said SAFE: the store decided
            found = {
                (b["managedLedger"], b["ledgerId"]): b["batchedEntries"] for b in seen["confirmation"]["batchedLedgers"]
            }
            assert found == {key: len(ids) for key, ids in stored.items()}
    assert stored, "the walk left no batched entry: it tests nothing"


def test_a_confirmation_of_a_store_without_batched_entries_keeps_safe_and_counts_what_it_read(cli, tmp_path):
    directory = simulate_into(tmp_path / "engine", coordinators=2, transactions=80, topics=2, subscriptions=3, seed=9)
    listing = cli(["engine", "dump", "--list", "--engine-dir", directory, "-o", "json"])
    logs = [m for m in json.loads(listing.stdout) if m["log"] in ("tc", "pending-ack")]
    code, seen = check(cli, directory, "--confirm-from-bookies")
    assert (code, seen["verdict"]) == (0, SAFE), seen["problems"]
    confirmation = seen["confirmation"]
    assert confirmation["source"] == "the engine's store"
    assert confirmation["logs"] == len(logs)
    assert confirmation["ledgers"] == sum(len(m["ledgers"]) for m in logs)
    assert confirmation["entries"] == sum(m["entries"] for m in logs) > 0
    assert confirmation["batchedEntries"] == 0 and confirmation["unread"] == []


def test_a_verdict_that_is_not_safe_is_not_confirmed(cli, tmp_path):
    directory = simulate_into(tmp_path / "engine", coordinators=1, transactions=20, seed=2)
    assert cli(["set-txn-tc-batch-log", "--enable", "--reload", "--yes", "--engine-dir", directory]).exit_code == 0
    code, seen = check(cli, directory, "--confirm-from-bookies")
    assert (code, seen["verdict"]) == (6, BLOCKED)
    assert "confirmation" not in seen


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--bookkeeper-shell", "/bin/true"], "--bookkeeper-shell only applies with --confirm-from-bookies"),
        (["--metadata-service-uri", "zk+null://z:2181/ledgers"], "--metadata-service-uri only applies with"),
        (
            ["--confirm-from-bookies", "--bookkeeper-classpath", "x.jar"],
            "--bookkeeper-classpath: the embedded engine has no bookies; --confirm-from-bookies reads its own store",
        ),
    ],
)
def test_bookie_options_out_of_place_are_one_sentence_and_exit_2(cli, simulated_engine, args, message):
    result = cli(["downgrade", "check", "--engine-dir", simulated_engine, *args])
    assert result.exit_code == 2
    assert message in result.stderr
    assert_no_crash(result)


@pytest.mark.parametrize(
    ("extra", "ending"),
    [
        ([], "or --bookkeeper-classpath CLASSPATH"),
        (["--bookkeeper-shell", "a", "--bookkeeper-classpath", "b"], ", not both"),
    ],
)
def test_a_cluster_needs_one_way_to_run_the_bookkeeper_shell(cli, extra, ending):
    result = cli(["downgrade", "check", "--admin-url", "http://127.0.0.1:9", "--confirm-from-bookies", *extra])
    assert result.exit_code == 2
    assert "give --bookkeeper-shell PATH (a distribution's bin/bookkeeper) or --bookkeeper-classpath" in result.stderr
    assert result.stderr.strip().endswith(ending), result.stderr


# ------------------------------------------------------------------ the rule, on verdicts built by hand


def safe_verdict() -> DowngradeVerdict:
    coordinator = ItemVerdict(tc(0, ledgers=(7, 9)), 7, 5, True, "oldest ledger 7 > last batched ledger 5")
    subscription = ItemVerdict(sub(ledgers=(12,)), 12, 11, True, "oldest ledger 12 > last batched ledger 11")
    return DowngradeVerdict(SAFE, "http://broker:8080", [coordinator], [subscription], [], [], None)


def read(ledger_id, *, expected=3, read=3, batched=(), open=False, error=None, ml="pulsar/system/__transaction_log_0"):
    return LedgerRead(ml, ledger_id, expected, open, read, tuple(batched), error)


def reading(*ledgers, problems=()) -> Reading:
    return Reading("the bookies (zk+null://z:2181/ledgers)", tuple(ledgers), 2, tuple(problems))


def test_every_ledger_read_and_none_batched_keeps_the_verdict_as_it_is():
    verdict = safe_verdict()
    assert apply_confirmation(verdict, reading(read(7), read(9, open=True), read(12, open=True))) is verdict


def test_a_batched_entry_blocks_and_marks_its_log():
    confirmed = apply_confirmation(safe_verdict(), reading(read(7), read(9, batched=range(4, 12)), read(12)))
    assert confirmed.verdict == BLOCKED
    [coordinator] = confirmed.coordinators
    assert (coordinator.clear, coordinator.cause) == (False, CAUSE_BATCHED_FOUND)
    assert coordinator.reason == "ledger 9 holds 8 batched entries (entries 4, 5, 6, 7, 8 and 3 more)"
    assert confirmed.subscriptions[0].clear  # the other log stays as it was
    assert confirmed.problems[0].startswith("1 remaining ledger holds batched entries (read from the bookies")


def test_a_batched_ledger_of_a_log_the_check_did_not_see_is_named_by_its_managed_ledger():
    stray = read(40, batched=[0], ml="public/default/persistent/new-s__transaction_pending_ack")
    confirmed = apply_confirmation(safe_verdict(), reading(read(7), read(9), read(12), stray))
    assert confirmed.verdict == BLOCKED
    assert "public/default/persistent/new-s__transaction_pending_ack: ledger 40 holds 1 batched entry (entry 0)" in (
        confirmed.problems
    )


@pytest.mark.parametrize(
    ("ledgers", "problems", "said"),
    [
        (
            [read(9, error="ledger 9: the shell exited 1: timeout")],
            (),
            "ledger 9 was not read: ledger 9: the shell exited 1",
        ),
        ([read(12, open=True, read=0, expected=2)], (), "the bookies have confirmed none of its 2 entries"),
        ([], ("subscription s of t: HTTP 500",), "--confirm-from-bookies: subscription s of t: HTTP 500"),
    ],
)
def test_what_could_not_be_read_is_wait_never_safe(ledgers, problems, said):
    confirmed = apply_confirmation(safe_verdict(), reading(read(7), *ledgers, problems=problems))
    assert confirmed.verdict == WAIT
    assert any(said in p for p in confirmed.problems), confirmed.problems


def test_an_open_ledger_read_short_of_the_brokers_count_answers_for_its_tail():
    """The bookies' last-add-confirmed trails the broker by the adds in flight; the same writer wrote the rest."""
    verdict = safe_verdict()
    assert apply_confirmation(verdict, reading(read(9, open=True, expected=5, read=3))) is verdict


def test_a_verdict_other_than_safe_is_returned_as_it_is():
    verdict = safe_verdict()
    verdict.verdict = WAIT
    assert apply_confirmation(verdict, reading(read(9, batched=[1]))) is verdict


def waiting_verdict(*, decides: bool) -> DowngradeVerdict:
    """WAIT on a log not recorded yet, as on Pulsar 2.11, whose brokers export no buffered-writer counters."""
    held = ItemVerdict(sub(ledgers=(12,)), 12, None, False, "not recorded yet", cause="not-recorded", advice="wait")
    clear = ItemVerdict(tc(0, ledgers=(7, 9)), 7, 5, True, "oldest ledger 7 > last batched ledger 5")
    problems = ["whether the TC logs were batched since the last check cannot be told yet (…)"]
    return DowngradeVerdict(WAIT, "http://broker:8080", [clear], [held], problems, [], None, reading_decides=decides)


def test_a_wait_only_stored_entries_hold_is_safe_once_none_read_is_batched():
    settled = apply_confirmation(waiting_verdict(decides=True), reading(read(7), read(9), read(12, open=True)))
    assert (settled.verdict, settled.problems, settled.fixes) == (SAFE, [], [])
    [subscription] = settled.subscriptions
    assert (subscription.clear, subscription.cause, subscription.advice) == (True, None, None)
    assert subscription.reason == (
        "none of its remaining ledgers holds a batched entry (read from the bookies (zk+null://z:2181/ledgers))"
    )
    assert settled.coordinators == waiting_verdict(decides=True).coordinators  # a clear log stays as it was


@pytest.mark.parametrize(
    "ledgers",
    [
        [read(7), read(12, batched=[2])],  # still batched: the downgrade goes on as time and traffic clear it
        [read(7), read(12, open=True, read=0, expected=2)],  # not all read
        [read(7), read(12, error="the shell exited 1")],
    ],
)
def test_a_wait_the_reading_cannot_settle_stands(ledgers):
    verdict = waiting_verdict(decides=True)
    assert apply_confirmation(verdict, reading(*ledgers)) is verdict


def test_a_wait_with_batching_not_off_everywhere_is_never_settled_by_a_reading():
    verdict = waiting_verdict(decides=False)
    assert apply_confirmation(verdict, reading(read(7), read(9), read(12))) is verdict


def batching_on_and_off(cli, path):
    """A workload, then both logs' batching on and off again, each with a reload, and no traffic in between."""
    directory = simulate_into(path, coordinators=1, transactions=20, seed=2)
    for state in ("--enable", "--disable"):
        for log in ("tc", "pending-ack"):
            switched = cli(
                [f"set-txn-{log}-batch-log", state, "--reload", "--yes", "--force", "--engine-dir", directory]
            )
            assert switched.exit_code == 0, switched.stderr
    return directory


def test_the_engine_decides_a_wait_from_its_store(cli, tmp_path):
    """Batching on and off again with no traffic in between: the pending-ack logs wait for their current ledgers
    to roll (they may hold batched entries, as far as ledger ids tell), and the reading of the engine's store,
    which finds none, settles it."""
    directory = batching_on_and_off(cli, tmp_path / "engine")
    code, first = check(cli, directory)
    assert (code, first["verdict"]) == (5, WAIT)
    assert {i["cause"] for i in first["subscriptions"]} == {"ledger-not-rolled"}, first
    code, seen = check(cli, directory, "--confirm-from-bookies")
    assert (code, seen["verdict"], seen["problems"]) == (0, SAFE, []), seen
    assert seen["confirmation"]["batchedEntries"] == 0 and seen["confirmation"]["unread"] == []
    assert all(i["clear"] and i["cause"] is None for i in seen["coordinators"] + seen["subscriptions"])
    assert "read from the engine's store" in seen["subscriptions"][0]["reason"]
    said = cli(["downgrade", "check", "--confirm-from-bookies", "--engine-dir", directory])
    assert said.exit_code == 0, said.stderr
    assert "can be downgraded: no remaining ledger holds a batched entry, as read (" in said.stdout + said.stderr


def test_a_reading_never_drops_what_verify_entries_found(cli, tmp_path):
    """--verify-entries holds the operator's dumps against the record and can only fail a verdict; with
    --confirm-from-bookies too, the reading comes first and the dumps' problems stand after it: a WAIT the
    reading settles stays WAIT while a dump holds an entry that does not decode (it may be batched)."""
    from pulsar_txn_cli.codec.dumps import dump_line

    directory = batching_on_and_off(cli, tmp_path / "engine")
    dumps = tmp_path / "dumps.jsonl"
    dumps.write_text(
        dump_line("pulsar/system/persistent/__transaction_log_0", 9, 0, b"\x0e\x01\x00\x01\xff\xff") + "\n"
    )
    code, seen = check(cli, directory, "--confirm-from-bookies", "--verify-entries", str(dumps))
    assert (code, seen["verdict"]) == (5, WAIT), seen
    assert seen["problems"] == ["--verify-entries: 1 of 1 entries could not be decoded, so they may be batched"], seen
    assert seen["confirmation"]["batchedEntries"] == 0  # the reading was made, and found nothing batched
    code, seen = check(cli, directory, "--confirm-from-bookies")
    assert (code, seen["verdict"]) == (0, SAFE), seen
