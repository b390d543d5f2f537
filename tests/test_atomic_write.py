"""The one atomic-write helper: the new text replaces the old, no temp file stays behind, and a
failed write leaves the old file as it was."""

from __future__ import annotations

import pytest

from pulsar_txn_cli.atomic_write import write_atomically


def test_replaces_the_file_and_leaves_no_temp_file(tmp_path):
    path = tmp_path / "state" / "doc.json"
    write_atomically(path, "old\n")
    write_atomically(path, "new\n")
    assert path.read_text() == "new\n"
    assert [p.name for p in path.parent.iterdir()] == ["doc.json"]


def test_a_failed_write_keeps_the_old_file(tmp_path):
    path = tmp_path / "doc.json"
    write_atomically(path, "old\n")
    with pytest.raises(UnicodeEncodeError):
        write_atomically(path, "\ud800")  # a lone surrogate cannot be written as UTF-8
    assert path.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["doc.json"]
