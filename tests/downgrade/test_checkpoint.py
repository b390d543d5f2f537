"""The checkpoint file: round trip, atomic writes, refusal of damaged files; status and reset."""

from __future__ import annotations

import json
import os

import pytest

from pulsar_txn_cli.downgrade import checkpoint as store
from tests.downgrade.builders import checkpoint


def test_round_trip(tmp_path):
    cp = checkpoint({0: 4, 3: 9}, {("persistent://public/default/t", "s"): 12})
    path = tmp_path / "cp.json"
    store.save(path, cp)
    assert store.load(path) == cp
    doc = json.loads(path.read_text())
    assert doc["target"] == cp.target and doc["format"] == 1
    assert doc["coordinators"][0] == {"coordinatorId": 0, "lastBatchedLedgerId": 4, "recordedAt": cp.created_at}


def test_missing_file_is_no_checkpoint(tmp_path):
    assert store.load(tmp_path / "none.json") is None


def test_save_replaces_atomically_and_leaves_no_temp_file(tmp_path):
    path = tmp_path / "cp.json"
    store.save(path, checkpoint({0: 1}))
    store.save(path, checkpoint({0: 1, 1: 2}))
    assert store.load(path).coordinators.keys() == {0, 1}
    assert os.listdir(tmp_path) == ["cp.json"]


def test_a_failed_write_keeps_the_old_file(tmp_path, monkeypatch):
    path = tmp_path / "cp.json"
    store.save(path, checkpoint({0: 1}))

    def boom(*_):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", boom)  # the one failure we cannot cause for real
    with pytest.raises(store.CheckpointError, match="disk full"):
        store.save(path, checkpoint({0: 1, 1: 2}))
    assert store.load(path).coordinators.keys() == {0}
    assert os.listdir(tmp_path) == ["cp.json"]


@pytest.mark.parametrize(
    "text",
    [
        "not json",
        "[]",
        '{"format": 2, "target": "x", "createdAt": "t"}',
        '{"format": 1, "target": 3, "createdAt": "t"}',
        '{"format": 1, "target": "x", "createdAt": "t", "coordinators": [{"coordinatorId": "0", "lastBatchedLedgerId": 1, "recordedAt": "t"}]}',
        '{"format": 1, "target": "x", "createdAt": "t", "coordinators": [{"coordinatorId": 0, "lastBatchedLedgerId": -2, "recordedAt": "t"}]}',
        '{"format": 1, "target": "x", "createdAt": "t", "coordinators": [{"coordinatorId": 0, "lastBatchedLedgerId": 1, "recordedAt": "t"}, {"coordinatorId": 0, "lastBatchedLedgerId": 2, "recordedAt": "t"}]}',
        '{"format": 1, "target": "x", "createdAt": "t", "subscriptions": [{"topic": "", "subscription": "s", "lastBatchedLedgerId": 1, "recordedAt": "t"}]}',
        '{"format": 1, "target": "x", "createdAt": "t", "subscriptions": {}}',
    ],
)
def test_damaged_files_are_refused_with_the_path(tmp_path, text):
    path = tmp_path / "cp.json"
    path.write_text(text)
    with pytest.raises(store.CheckpointError) as err:
        store.load(path)
    assert str(path) in str(err.value)


def test_default_path_is_per_target(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    a, b = store.default_path("cluster http://a:8080"), store.default_path("cluster http://b:8080")
    assert a != b and a.parent == b.parent
    assert str(a).startswith(str(tmp_path))


def test_status_and_reset(cli, tmp_path):
    path = tmp_path / "cp.json"
    engine_dir = tmp_path / "engine"
    assert cli(["engine", "init", "--engine-dir", engine_dir]).exit_code == 0
    result = cli(["downgrade", "status", "--checkpoint", path, "--engine-dir", engine_dir, "-o", "json"])
    assert result.exit_code == 0, result.stderr
    assert result.json()["exists"] is False
    from pulsar_txn_cli.engine.broker import Engine

    with Engine.open(engine_dir, readonly=True) as engine:
        identity = f"engine {engine.engine_id}"
    store.save(path, checkpoint({0: 4}, target=identity))
    result = cli(["downgrade", "status", "--checkpoint", path, "--engine-dir", engine_dir])
    assert result.exit_code == 0, result.stderr
    assert "coordinator 0" in result.stdout and "4" in result.stdout
    assert "warning" not in result.stdout
    result = cli(["downgrade", "reset", "--checkpoint", path, "--engine-dir", engine_dir, "-o", "json"])
    assert result.exit_code == 0 and result.json()["removed"] is True
    assert not path.exists()
    result = cli(["downgrade", "reset", "--checkpoint", path, "--engine-dir", engine_dir, "-o", "json"])
    assert result.json()["removed"] is False


def test_status_warns_about_a_foreign_checkpoint(cli, tmp_path):
    path = tmp_path / "cp.json"
    store.save(path, checkpoint({0: 4}, target="cluster http://elsewhere:8080"))
    assert cli(["engine", "init", "--engine-dir", tmp_path / "e"]).exit_code == 0
    result = cli(["downgrade", "status", "--checkpoint", path, "--engine-dir", tmp_path / "e"])
    assert result.exit_code == 0
    assert "belongs to 'cluster http://elsewhere:8080'" in result.stdout


def test_status_of_a_damaged_checkpoint_is_a_data_error(cli, tmp_path):
    path = tmp_path / "cp.json"
    path.write_text("{")
    assert cli(["engine", "init", "--engine-dir", tmp_path / "e"]).exit_code == 0
    result = cli(["downgrade", "status", "--checkpoint", path, "--engine-dir", tmp_path / "e"])
    assert result.exit_code == 3
    assert str(path) in result.stderr and "Traceback" not in result.stderr


def test_an_unwritable_place_is_a_clear_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(store.CheckpointError, match="cannot write checkpoint"):
        store.save(blocker / "cp.json", checkpoint({0: 1}))  # its parent is a file


def test_reset_never_deletes_a_file_that_is_not_a_checkpoint(cli, tmp_path):
    """A mistyped --checkpoint (a note, a config file, a directory) is refused, exit 2, and kept."""
    engine_dir = tmp_path / "engine"
    assert cli(["engine", "init", "--engine-dir", engine_dir]).exit_code == 0
    for name, text in (
        ("notes.txt", "ledger ids kept on paper\n"),
        ("other.json", '{"format": 99}'),
        ("empty.json", ""),
    ):
        victim = tmp_path / name
        victim.write_text(text)
        result = cli(["downgrade", "reset", "--checkpoint", victim, "--engine-dir", engine_dir])
        assert result.exit_code == 2, (name, result.stderr)
        assert f"{victim} is not a downgrade checkpoint" in result.stderr and "Traceback" not in result.stderr
        assert victim.read_text() == text
    result = cli(["downgrade", "reset", "--checkpoint", tmp_path, "--engine-dir", engine_dir])
    assert result.exit_code == 2 and tmp_path.is_dir()
