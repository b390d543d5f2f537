"""One rule for inputs that hold no entries: a data error (exit 3) naming the input, never an
empty result; files are checked before any work, so nothing reaches stdout. Giving no input at
all stays a usage error (exit 2)."""

from __future__ import annotations

import pytest

from pulsar_txn_cli.codec import dumps
from tests.codec.samples import TC_ML, tc_lifecycle
from pulsar_txn_cli import codec

BATCH = codec.encode_batch(tc_lifecycle(1))


@pytest.fixture(params=["", "\n\n  \n"], ids=["0 bytes", "blank lines"])
def empty(request, tmp_path):
    path = tmp_path / "empty.jsonl"
    path.write_text(request.param)
    return path


@pytest.mark.parametrize(
    "args",
    [
        ["decode", "--log", "tc"],
        ["decode", "-f", "jsonl"],
        ["decode", "-f", "hex", "--log", "tc"],
        ["analyze", "--engine", "local"],
    ],
)
@pytest.mark.parametrize("output", ["table", "json"])
def test_an_empty_file_is_a_data_error(cli, empty, args, output):
    result = cli([*args, "-o", output, empty])
    assert result.exit_code == 3, result.stderr
    assert f"{empty} holds no entries (it is empty)" in result.stderr
    assert result.stdout == ""


def test_an_empty_file_among_good_ones_is_refused_before_any_output(cli, empty, tmp_path):
    good = tmp_path / "good.jsonl"
    good.write_text(dumps.dump_line(TC_ML, 1, 0, BATCH) + "\n")
    result = cli(["decode", "-o", "json", good, empty])
    assert result.exit_code == 3 and result.stdout == "" and str(empty) in result.stderr


@pytest.mark.parametrize("stdin", ["", "\n \n"])
def test_empty_stdin_is_a_data_error(cli, stdin):
    result = cli(["decode", "--log", "tc", "-o", "json"], input=stdin)
    assert result.exit_code == 3 and "stdin holds no entries" in result.stderr and result.stdout == ""


def test_empty_hex_option_is_a_data_error(cli):
    result = cli(["decode", "--log", "tc", "--hex", " "])
    assert result.exit_code == 3 and "--hex holds no entries" in result.stderr


def test_a_text_file_without_any_entry_is_a_data_error(cli, tmp_path):
    text = tmp_path / "log.txt"
    text.write_text("2026-11-22T02:03:44,928+0000 [main] INFO Lid=5, Eid=1 but no dump follows\n")
    result = cli(["analyze", "--engine", "local", "-m", TC_ML, "-f", "readledger", text])
    assert result.exit_code == 3 and "holds no entries" in result.stderr


def test_a_directory_skips_empty_part_files_but_not_when_all_are_empty(cli, tmp_path):
    out = tmp_path / "spark-out"
    out.mkdir()
    (out / "part-00000.jsonl").write_text("")
    result = cli(["analyze", "--engine", "local", "-o", "json", out])
    assert result.exit_code == 3 and f"{out} holds no entries" in result.stderr
    (out / "part-00001.jsonl").write_text(dumps.dump_line(TC_ML, 1, 0, BATCH) + "\n")
    result = cli(["analyze", "--engine", "local", "-o", "json", out])
    assert result.exit_code == 0, result.stderr
    assert result.json()["totals"]["entries"] == 1


def test_downgrade_verify_entries_refuses_an_empty_dump(cli, empty, tmp_path):
    result = cli(["downgrade", "check", "--engine-dir", tmp_path / "eng", "--verify-entries", empty])
    assert result.exit_code == 3, result.stderr
    assert f"{empty} holds no entries" in result.stderr


def test_no_input_at_all_stays_a_usage_error(cli):
    assert cli(["analyze"]).exit_code == 2
