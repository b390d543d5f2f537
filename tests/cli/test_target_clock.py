"""Times on the target's clock, and saying which clock.

The engine runs on a virtual clock (2026-01-01 plus the time its workloads took); a client of
`engine serve` used this machine's clock instead and said a transaction was held "325d12h ago"
where the same engine in process said "1m30s". A broker has no clock endpoint: the wall clock.
"""

from __future__ import annotations

import time

import pytest

from pulsar_txn_cli.output.units import iso_seconds
from tests.conftest import isolate

from tests.engine.buffer.test_stuck_readers_engine import held  # noqa: F401 - the fixture: held for 90 s of engine time
from tests.engine.buffer.test_stuck_readers_http import OPEN_AT, broker  # noqa: F401 - a broker stand-in

ENGINE_START_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z, where an engine's clock starts


@pytest.fixture(autouse=True)
def isolated(monkeypatch, tmp_path):
    isolate(monkeypatch, tmp_path)


@pytest.fixture(params=["engine", "http"])
def engine_target(request, held):  # noqa: F811
    directory = held[0]
    if request.param == "engine":
        yield ["--engine-dir", str(directory)]
        return
    from pulsar_txn_cli.engine import server

    with server.start(str(directory)) as served:
        yield ["--admin-url", served.url]


def test_stuck_readers_ages_are_in_engine_time_on_both_backends(cli, engine_target):
    result = cli(["stuck-readers", "-t", "orders", *engine_target, "-o", "json"])
    assert result.exit_code == 0, result.stderr
    report = result.json()
    assert report["clock"] == "engine time"
    [partition] = report["partitions"]
    assert partition["holders"][0]["ageMs"] == 90_000
    table = cli(["stuck-readers", "-t", "orders", *engine_target])
    assert "HELD SINCE (ENGINE TIME)" in table.stdout
    assert "2026-01-01 00:00:00Z (1m30s ago)" in table.stdout


def test_a_broker_is_judged_on_the_wall_clock(cli, broker):  # noqa: F811
    result = cli(["stuck-readers", "-t", "orders", "--admin-url", broker, "-o", "json"])
    assert result.exit_code == 0, result.stderr
    report = result.json()
    assert report["clock"] == "wall clock"
    age = report["partitions"][0]["holders"][0]["ageMs"]
    assert abs(age - (time.time() * 1000 - OPEN_AT)) < 60_000
    assert "HELD SINCE (WALL CLOCK)" in cli(["stuck-readers", "-t", "orders", "--admin-url", broker]).stdout


def test_downgrade_records_and_shows_engine_time_on_both_backends(cli, engine_target, tmp_path):
    checkpoint = tmp_path / "checkpoint.json"
    check = cli(["downgrade", "check", *engine_target, "--checkpoint", checkpoint, "-o", "json"])
    assert check.exit_code in (0, 5), check.stderr
    status = cli(["downgrade", "status", *engine_target, "--checkpoint", checkpoint, "-o", "json"]).json()
    assert status["clock"] == "engine time"
    # The engine's clock stood at 2026-01-01T00:01:30Z (held for 90 s); this machine's is elsewhere.
    assert status["createdAt"] // 10_000 == ENGINE_START_MS // 10_000 + 9  # 2026-01-01T00:01:3xZ, in epoch ms
    assert {r["recordedAt"] for r in status["coordinators"]} == {status["createdAt"]}
    table = cli(["downgrade", "status", *engine_target, "--checkpoint", checkpoint])
    assert f"created {iso_seconds(status['createdAt'])} (engine time)" in table.stdout
    assert "RECORDED AT (ENGINE TIME)" in table.stdout
