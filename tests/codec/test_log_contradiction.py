"""A --log that the input's own managed-ledger name contradicts is refused (exit 2), unless forced.

Decoding a pending-ack log's bytes as the TC log does not fail: it gives nonsense records, so the
name the dump carries must win over a mistyped --log.
"""

from __future__ import annotations

from pulsar_txn_cli import codec
from pulsar_txn_cli.codec import dumps
from tests.codec.samples import PA_ML, TC_ML, pending_ack, tc_lifecycle

PA = codec.encode_batch([pending_ack(1), pending_ack(2, op=2)])
TC = codec.encode_batch(tc_lifecycle(1))


def _dump(path, *rows):
    path.write_text("".join(dumps.dump_line(ml, 7, n, data) + "\n" for n, (ml, data) in enumerate(rows)))
    return path


def test_decode_refuses_a_log_the_dump_contradicts(cli, tmp_path):
    dump = _dump(tmp_path / "pa.jsonl", (PA_ML, PA), (PA_ML, PA))
    for output in ("table", "json"):
        result = cli(["decode", "--log", "tc", "-o", output, dump])
        assert result.exit_code == 2, result.stderr
        assert result.stdout == ""  # refused before anything was written
        assert "--log tc contradicts entry 7:0" in result.stderr and "pending-ack log" in result.stderr
        assert "--force-log" in result.stderr


def test_decode_force_log_keeps_the_old_behaviour(cli, tmp_path):
    dump = _dump(tmp_path / "pa.jsonl", (PA_ML, PA))
    result = cli(["decode", "--log", "tc", "--force-log", "-o", "json", dump])
    assert result.exit_code in (0, 3), result.stderr
    assert "contradicts" not in result.stderr


def test_decode_agreeing_log_and_nameless_input_still_work(cli, tmp_path):
    dump = _dump(tmp_path / "pa.jsonl", (PA_ML, PA))
    assert cli(["decode", "--log", "pending-ack", "-o", "json", dump]).exit_code == 0
    assert cli(["decode", "--log", "pending-ack", "--hex", PA.hex(), "-o", "json"]).exit_code == 0


def test_decode_stops_at_a_later_entry_of_the_other_log(cli, tmp_path):
    dump = _dump(tmp_path / "both.jsonl", (TC_ML, TC), (PA_ML, PA))
    result = cli(["decode", "--log", "tc", "-o", "json", dump])
    assert result.exit_code == 2 and "entry 7:1" in result.stderr
    assert len(result.json()) == 1  # the array written so far is closed


def test_analyze_refuses_a_contradicting_log_before_the_work(cli, tmp_path):
    dump = _dump(tmp_path / "pa.jsonl", (PA_ML, PA))
    result = cli(["analyze", "--engine", "local", "--log", "tc", "-o", "json", dump])
    assert result.exit_code == 2 and "contradicts" in result.stderr and result.stdout == ""
    assert cli(["analyze", "--engine", "local", "--log", "tc", "--force-log", "-o", "json", dump]).exit_code in (0, 3)


def test_analyze_refuses_a_later_managed_ledger_of_the_other_log(cli, tmp_path):
    dump = _dump(tmp_path / "both.jsonl", (TC_ML, TC), (PA_ML, PA))
    result = cli(["analyze", "--engine", "local", "--log", "tc", "-o", "json", dump])
    assert result.exit_code == 2 and PA_ML in result.stderr
