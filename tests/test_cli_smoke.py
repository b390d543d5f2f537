from pulsar_txn_cli import codec


def test_version(cli):
    result = cli(["--version"])
    assert result.exit_code == 0
    assert result.stdout.startswith("pulsar-txn ")


def test_unknown_command_is_usage_error(cli):
    result = cli(["no-such-command"])
    assert result.exit_code == 2
    assert "Traceback" not in result.stderr


def test_decode_hex_json(cli):
    entry = codec.encode_batch([codec.TcRecord(metadata_op=0, txnid_most_bits=2, txnid_least_bits=i) for i in range(3)])
    result = cli(["decode", "--hex", entry.hex(), "--log", "tc", "-o", "json"])
    assert result.exit_code == 0, result.stderr
    [decoded] = result.json()
    assert decoded["batched"] is True
    assert [r["txnId"] for r in decoded["records"]] == ["(2,0)", "(2,1)", "(2,2)"]
    assert [r["batchIndex"] for r in decoded["records"]] == [0, 1, 2]


def test_the_first_command_on_an_engine_directory_says_it_creates_the_engine(cli, tmp_path):
    engine = str(tmp_path / "engine")
    first = cli(["coordinators-list", "--engine-dir", engine, "-o", "json"])
    assert first.exit_code == 0, first.stderr
    assert "new: created with the defaults" in first.stderr
    again = cli(["coordinators-list", "--engine-dir", engine, "-o", "json"])
    assert again.exit_code == 0 and "new:" not in again.stderr
    assert again.json() == first.json()
