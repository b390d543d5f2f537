"""`pulsar-txn decode` end to end through the real entry point."""

from __future__ import annotations

import base64

from pulsar_txn_cli import codec
from pulsar_txn_cli.codec import dumps, readledger
from tests.codec.samples import LOG_PREFIX, PA_ML, TC_ML, pending_ack, tc_lifecycle
from tests.conftest import assert_no_crash

BATCH = codec.encode_batch(tc_lifecycle(1))
SINGLE = codec.encode_single(tc_lifecycle(2)[0])
PA_BATCH = codec.encode_batch([pending_ack(1), pending_ack(1, op=2)])


def jsonl_dump(*rows) -> str:
    return "".join(dumps.dump_line(ml, lid, eid, data) + "\n" for ml, lid, eid, data in rows)


# ---------------------------------------------------------------- inputs


def test_hex_option_json_is_an_array_of_one(cli):
    result = cli(["decode", "--hex", BATCH.hex(), "--log", "tc", "-o", "json"])
    assert result.exit_code == 0, result.stderr
    [entry] = result.json()
    assert entry == codec.entry_to_json(codec.decode_entry(BATCH, "tc"))
    assert [r["metadataOp"] for r in entry["records"]] == [
        "NEW",
        "ADD_PARTITION",
        "ADD_SUBSCRIPTION",
        "UPDATE",
        "UPDATE",
    ]


def test_repeated_hex_and_base64_options(cli):
    args = [
        "decode",
        "--hex",
        BATCH.hex(),
        "--hex",
        SINGLE.hex(),
        "--base64",
        base64.b64encode(SINGLE).decode(),
        "--log",
        "tc",
        "-o",
        "json",
    ]
    result = cli(args)
    assert result.exit_code == 0, result.stderr
    assert [(e["batched"], len(e["records"])) for e in result.json()] == [(True, 5), (False, 1), (False, 1)]


def test_files_in_every_format(cli, tmp_path):
    (tmp_path / "e.bin").write_bytes(BATCH)
    (tmp_path / "e.hex").write_text(BATCH.hex() + "\n" + SINGLE.hex() + "\n")
    (tmp_path / "e.b64").write_text(base64.b64encode(SINGLE).decode() + "\n")
    (tmp_path / "e.txt").write_text(readledger.format_ledger(9, [BATCH, SINGLE], LOG_PREFIX))
    (tmp_path / "e.jsonl").write_text(jsonl_dump((TC_ML, 9, 2, BATCH)))
    names = ["e.bin", "e.hex", "e.b64", "e.txt", "e.jsonl"]
    result = cli(["decode", "--log", "tc", "-o", "json", *[tmp_path / n for n in names]])
    assert result.exit_code == 0, result.stderr
    got = [(e["ledgerId"], e["entryId"], e["batched"]) for e in result.json()]
    assert got == [
        (None, None, True),
        (None, None, True),
        (None, None, False),
        (None, None, False),
        (9, 0, True),
        (9, 1, False),
        (9, 2, True),
    ]
    assert result.json()[6]["managedLedger"] == TC_ML


def test_explicit_format_overrides_detection(cli, tmp_path):
    path = tmp_path / "ambiguous.txt"
    path.write_text("CAEQAhgD\n")  # base64 of a TC record
    assert (
        cli(["decode", "-f", "base64", "--log", "tc", "-o", "json", path]).json()[0]["records"][0]["txnId"] == "(3,2)"
    )
    result = cli(["decode", "--format", "hex", "--log", "tc", path])
    assert result.exit_code == 3 and "not hexadecimal" in result.stderr


def test_raw_format_reads_the_whole_file(cli, tmp_path):
    path = tmp_path / "entry"
    path.write_bytes(SINGLE)
    result = cli(["decode", "--format", "raw", "--log", "tc", "-o", "json", path])
    assert result.json()[0]["size"] == len(SINGLE)


def test_stdin_dash_and_implicit_stdin(cli):
    text = jsonl_dump((TC_ML, 3, 0, BATCH), (PA_ML, 4, 0, PA_BATCH))
    for args in (["decode", "-", "-o", "jsonl"], ["decode", "-o", "jsonl"]):
        result = cli(args, input=text)
        assert result.exit_code == 0, result.stderr
        assert [(e["log"], e["ledgerId"]) for e in result.jsonl()] == [("tc", 3), ("pending-ack", 4)]


def test_stdin_auto_detects_on_the_first_non_empty_line(cli):
    result = cli(["decode", "--log", "tc", "-o", "json"], input="\n0e01\n08\nzz\n" + SINGLE.hex() + "\n")
    assert result.exit_code == 3
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: entry")]
    assert errors == [
        "error: entry stdin #1: the entry starts with the batch magic 0x0E01 but is only 2 bytes long; a batched entry needs a 4-byte prefix (magic and version) (at byte 2)",
        "error: entry stdin #2: the TC log record is truncated: a varint runs past the end (at byte 1)",
        "error: entry stdin #3: the line is not hexadecimal ('z' at character 1)",
    ]
    assert [e["records"][0]["txnId"] for e in result.json()] == ["(1,2)"]
    assert "error: 3 of 4 entries could not be decoded; the other 1 was decoded" in result.stderr


# ---------------------------------------------------------------- --log


def test_log_auto_from_managed_ledger_names(cli):
    text = jsonl_dump((TC_ML, 3, 0, SINGLE), (PA_ML, 4, 0, PA_BATCH))
    result = cli(["decode", "-o", "json"], input=text)
    assert [e["log"] for e in result.json()] == ["tc", "pending-ack"]


def test_log_auto_without_a_name_asks_for_log(cli):
    result = cli(["decode", "--hex", SINGLE.hex()])
    assert result.exit_code == 2
    assert "pass --log tc or --log pending-ack" in result.stderr
    assert_no_crash(result)
    result = cli(["decode", "-o", "json"], input=jsonl_dump(("public/default/persistent/orders", 1, 0, SINGLE)))
    assert result.exit_code == 2 and "'public/default/persistent/orders' is neither a TC log" in result.stderr
    assert result.stdout == ""  # refused before anything was written


def test_log_flag_overrides_the_name_only_when_forced(cli):
    dump = jsonl_dump((TC_ML, 3, 0, PA_BATCH))
    assert cli(["decode", "--log", "pending-ack", "-o", "json"], input=dump).exit_code == 2
    result = cli(["decode", "--log", "pending-ack", "--force-log", "-o", "json"], input=dump)
    assert result.json()[0]["log"] == "pending-ack"


# ---------------------------------------------------------------- output


def test_json_is_always_an_array(cli):
    result = cli(["decode", "--hex", SINGLE.hex(), "--log", "tc", "-o", "json"])
    assert result.exit_code == 0 and isinstance(result.json(), list)


def test_jsonl_is_one_entry_per_line(cli):
    text = jsonl_dump(*[(TC_ML, 3, i, BATCH) for i in range(4)])
    result = cli(["decode", "-o", "jsonl"], input=text)
    lines = result.stdout.splitlines()
    assert len(lines) == 4 and all(line.startswith('{"ledgerId":3,') for line in lines)


def test_table_has_one_row_per_record(cli):
    text = jsonl_dump((TC_ML, 3, 0, BATCH), (PA_ML, 4, 7, codec.encode_single(pending_ack(9, cumulative=True))))
    result = cli(["decode"], input=text, env={"NO_COLOR": "1"})
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["POSITION", "BATCH", "TXN", "ID", "OP", "SUMMARY"]
    rows = [line.split(None, 4) for line in lines[2:]]
    assert len(rows) == 6
    assert rows[0] == ["3:0", "0/5", "(1,1)", "NEW", "timeout 30000 ms, owner pulsar://broker-1:6650"]
    assert rows[3][:4] == ["3:0", "3/5", "(1,1)", "UPDATE:COMMITTING"]
    assert rows[5] == ["4:7", "-", "(1,9)", "ACK", "Cumulative 12:3"]


def test_global_options_before_the_subcommand(cli):
    result = cli(["-o", "jsonl", "decode", "--hex", SINGLE.hex(), "--log", "tc"])
    assert result.exit_code == 0 and result.jsonl()[0]["batched"] is False


def test_quiet_keeps_errors(cli):
    result = cli(["decode", "-q", "--hex", "0e", "--hex", SINGLE.hex(), "--log", "tc", "-o", "json"])
    assert result.exit_code == 3 and "decoded 1 entry" not in result.stderr
    assert "error: entry --hex #1: the entry is the single byte 0x0E: a truncated batch prefix" in result.stderr


# ---------------------------------------------------------------- bad entries


def test_bad_entries_are_reported_and_the_rest_decoded(cli):
    bad_required = codec.PendingAckRecord(pending_ack_op=1)
    bad_required.pending_ack_metadata.add(entryId=1)
    text = jsonl_dump(
        (PA_ML, 5, 0, PA_BATCH),
        (PA_ML, 5, 1, b""),
        (PA_ML, 5, 2, PA_BATCH[:-4]),
        (PA_ML, 5, 3, bad_required.SerializePartialToString()),
        (PA_ML, 5, 4, PA_BATCH),
    )
    result = cli(["decode", "-o", "json"], input=text + "not json\n")
    assert result.exit_code == 3
    assert [e["entryId"] for e in result.json()] == [0, 4]
    stderr = result.stderr
    assert "error: entry 5:1: the entry is empty (0 bytes)" in stderr
    assert "error: entry 5:2: the batched pending-ack entry is truncated: record 1 of the batch" in stderr
    assert "error: entry 5:3: the pending-ack record lacks required field pending_ack_metadata[0].ledgerId" in stderr
    assert "error: entry stdin #6: line 6 of stdin is not JSON" in stderr
    assert "error: 4 of 6 entries could not be decoded; the other 2 were decoded" in stderr
    assert_no_crash(result)


def test_strict_stops_at_the_first_bad_entry(cli):
    text = jsonl_dump((TC_ML, 5, 0, SINGLE), (TC_ML, 5, 1, b"\x0e"), (TC_ML, 5, 2, SINGLE))
    result = cli(["decode", "--strict", "-o", "json"], input=text)
    assert result.exit_code == 3
    assert [e["entryId"] for e in result.json()] == [0]  # valid JSON even though it stopped
    assert "stopped at the first entry that could not be decoded (--strict), after 1 good entry" in result.stderr


def test_lossy_readledger_dump_has_its_own_message(cli, tmp_path):
    path = tmp_path / "string.txt"
    path.write_text(
        LOG_PREFIX
        + f"--------- Lid=9, Eid=0, EntrySize={len(BATCH)} ---------\n"
        + BATCH.decode("utf-8", "replace")
        + "\n"
    )
    result = cli(["decode", "--log", "tc", path])
    assert result.exit_code == 3
    assert "error: entry 9:0: the entry was dumped as text (readledger's default string formatter)" in result.stderr


def test_unknown_version_is_a_warning_with_exit_0(cli):
    result = cli(["decode", "--hex", codec.encode_batch(tc_lifecycle(1), version=2).hex(), "--log", "tc", "-o", "json"])
    assert result.exit_code == 0
    assert "warning: entry --hex #1: unknown batch version 2; decoded with the version-1 layout" in result.stderr
    assert result.json()[0]["warnings"] == ["unknown batch version 2; decoded with the version-1 layout"]


# ---------------------------------------------------------------- usage errors


def test_usage_errors_exit_2(cli, tmp_path):
    for args, message in [
        (["decode", "--log", "txn"], "Invalid value for '--log'"),
        (["decode", "--format", "xml", "--log", "tc"], "Invalid value for '--format'"),
        (["decode", "--log", "tc", tmp_path / "missing.txt"], "cannot read"),
        (["decode", "--log", "tc", tmp_path], "it is a directory"),
    ]:
        result = cli(args)
        assert result.exit_code == 2, args
        assert message in result.stderr
        assert_no_crash(result)


def test_repeated_hex_values_are_numbered_in_order(cli):
    result = cli(["decode", "--hex", "0e", "--hex", SINGLE.hex(), "--hex", "zz", "--log", "tc", "-o", "jsonl"])
    assert result.exit_code == 3
    assert "error: entry --hex #1: the entry is the single byte 0x0E" in result.stderr
    assert "error: entry --hex #3: the line is not hexadecimal" in result.stderr
    assert len(result.jsonl()) == 1
