"""collect/scan.py and `downgrade check --confirm-from-bookies` through BookKeeper's shell, on the fast
suite's cluster (conftest.py: an engine served over real HTTP, and a STAND-IN shell answering from its
dump; the real shell and bookies: tests/integration/test_real_downgrade.py)."""

from __future__ import annotations

import base64
import json
import stat
import sys

import pytest

from tests.collect.fleet import STANDIN, URI
from tests.conftest import simulate_into

from pulsar_txn_cli.codec import is_batched


def url_admin(url: str):
    from pulsar_txn_cli.admin.client import PulsarAdmin
    from pulsar_txn_cli.transport.http_client import RestTransport
    from pulsar_txn_cli.target.settings import Target

    target = Target(kind="cluster", url=url)
    return PulsarAdmin(RestTransport(target), target)


def batched_in(dump) -> dict[tuple[str, int], list[int]]:
    found: dict = {}
    for line in dump.read_text().splitlines():
        entry = json.loads(line)
        if is_batched(base64.b64decode(entry["data"])):
            found.setdefault((entry["managedLedger"], entry["ledgerId"]), []).append(entry["entryId"])
    return found


def test_every_remaining_ledger_is_read_through_the_shell_and_its_batched_entries_found(fleet):
    from pulsar_txn_cli.collect.scan import read_remaining

    reading = read_remaining(url_admin(fleet["url"]), shell_options={"script": fleet["shell"]}, metadata_uri=URI)
    expected = batched_in(fleet["dump"])
    assert expected, "the fleet's workload batched nothing: the test would prove nothing"
    assert {(r.managed_ledger, r.ledger_id): list(r.batched) for r in reading.ledgers if r.batched} == expected
    listed = {(r.managed_ledger, r.ledger_id) for r in reading.ledgers}
    called = {int(x) for x in fleet["calls"].read_text().split()}
    assert called == {ledger for _, ledger in listed}  # one shell run per remaining ledger, no other
    assert reading.source == f"the bookies (metadata service {URI})"
    assert not any(r.error for r in reading.ledgers) and reading.problems == ()


def test_a_ledger_the_shell_cannot_read_and_still_listed_is_reported_not_dropped(fleet, monkeypatch):
    from pulsar_txn_cli.collect.scan import read_remaining

    first = read_remaining(url_admin(fleet["url"]), shell_options={"script": fleet["shell"]}, metadata_uri=URI)
    victim = first.ledgers[0].ledger_id
    monkeypatch.setenv("STANDIN_FAIL", str(victim))
    again = read_remaining(url_admin(fleet["url"]), shell_options={"script": fleet["shell"]}, metadata_uri=URI)
    [failed] = [r for r in again.ledgers if r.error]
    assert failed.ledger_id == victim and "the shell exited 1" in failed.error
    assert again.gone == 0


@pytest.fixture
def safe_cluster(tmp_path, monkeypatch):
    """A served engine that never batched (SAFE at once), with one batched entry written straight into
    coordinator 0's current ledger (bytes no ledger id accounts for), its dump, and the stand-in shell."""
    from pulsar_txn_cli.engine import server
    from pulsar_txn_cli.codec.framing import encode_batch_serialized
    from pulsar_txn_cli.engine import dump
    from pulsar_txn_cli.engine.broker import Engine

    directory = simulate_into(tmp_path / "engine", coordinators=2, transactions=40, topics=1, subscriptions=2, seed=8)
    engine = Engine.open(directory)
    ml = engine.managed_ledger(engine.tc_log_names()[0])
    *_, (_, _, data) = ml.read_all()
    with engine.store.tx():
        [(ledger_id, entry_id)] = ml.add_entries([encode_batch_serialized([bytes(data)])])
    dump_path = tmp_path / "engine.jsonl"
    dump_path.write_text("".join(line + "\n" for line in dump.lines(engine, dump.select(engine, None, "all"))))
    script = tmp_path / "bookkeeper"
    script.write_text(f'#!/bin/sh\nexec {sys.executable} {STANDIN} "$@"\n')
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("STANDIN_DUMP", str(dump_path))
    srv = server.start(engine=engine)
    yield {"url": srv.url, "shell": str(script), "ledger": ledger_id, "entry": entry_id, "tmp": tmp_path}
    srv.close()
    engine.close()


def test_a_safe_cluster_whose_bookies_hold_a_batched_entry_is_blocked(cli, safe_cluster):
    c = safe_cluster
    base = ["downgrade", "check", "--admin-url", c["url"], "--checkpoint", c["tmp"] / "cp.json", "-o", "json"]
    plain = cli(base)
    assert plain.exit_code == 0, plain.stdout + plain.stderr  # the ids alone say SAFE
    confirmed = cli([*base, "--confirm-from-bookies", "--bookkeeper-shell", c["shell"], "--metadata-service-uri", URI])
    assert confirmed.exit_code == 6, confirmed.stderr
    data = json.loads(confirmed.stdout)
    assert data["verdict"] == "BLOCKED"
    assert data["confirmation"]["source"] == f"the bookies (metadata service {URI})"
    assert [(b["ledgerId"], b["entryIds"]) for b in data["confirmation"]["batchedLedgers"]] == [
        (c["ledger"], [c["entry"]])
    ]
    assert f"coordinator 0: ledger {c['ledger']} holds 1 batched entry (entry {c['entry']})" in data["problems"]


def test_a_ledger_trimmed_between_the_listing_and_its_shell_is_gone_not_a_failure(fleet, monkeypatch):
    """The trim is made by hand: the second listing (the one taken after a failure) leaves the ledger out,
    as a log that trimmed it meanwhile would."""
    from pulsar_txn_cli.collect import scan

    first = scan.read_remaining(url_admin(fleet["url"]), shell_options={"script": fleet["shell"]}, metadata_uri=URI)
    # A trim never takes a log's current ledger: the victim is an older one, its log still listed without it.
    victim = next(r for r in first.ledgers if sum(o.managed_ledger == r.managed_ledger for o in first.ledgers) > 1)
    listings = []

    def trimmed_on_second_look(admin, concurrency):
        tasks, problems = real_plan(admin, concurrency)
        listings.append(len(tasks))
        if len(listings) > 1:
            tasks = [t for t in tasks if t.ledger_id != victim.ledger_id]
        return tasks, problems

    from pulsar_txn_cli.collect import plan

    real_plan = plan.plan
    monkeypatch.setattr(scan, "plan", trimmed_on_second_look)
    monkeypatch.setattr(plan, "plan", trimmed_on_second_look)
    monkeypatch.setenv("STANDIN_FAIL", str(victim.ledger_id))
    reading = scan.read_remaining(url_admin(fleet["url"]), shell_options={"script": fleet["shell"]}, metadata_uri=URI)
    assert len(listings) == 2  # listed, then listed again because a ledger failed
    assert reading.gone == 1 and victim.ledger_id not in {r.ledger_id for r in reading.ledgers}
    assert not any(r.error for r in reading.ledgers)
