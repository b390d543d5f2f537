"""The operator's second trial (issue 21 §6): one test per item, each failing without its fix."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.timeout(120)


# -- 5: a mistyped --engine-dir ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [
        ["coordinator-stats"],
        ["downgrade", "check"],
        ["get-txn-tc-batch-log-stat"],
        ["engine", "dump"],
        ["engine", "verify"],
        ["engine", "metrics"],
        ["engine", "config", "list"],
        ["engine", "reload"],
    ],
    ids=" ".join,
)
def test_a_mistyped_engine_dir_is_one_error_and_creates_nothing(cli, tmp_path, command):
    typo = tmp_path / "typo"
    result = cli([*command, "--engine-dir", typo])
    assert result.exit_code == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr  # no "target: ... (new: created ...)" before the error
    assert lines[0].startswith(f"error: no engine in {typo} (--engine-dir)")
    assert f"`pulsar-txn engine init --engine-dir {typo}`" in lines[0]
    assert result.stdout == ""
    assert not typo.exists()
