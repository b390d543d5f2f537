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


def test_the_first_command_on_the_default_engine_says_it_creates_it(cli, tmp_path):
    env = {"XDG_DATA_HOME": str(tmp_path / "data")}
    first = cli(["coordinators-list", "-o", "json"], env=env)
    assert first.exit_code == 0, first.stderr
    assert "new: created with the defaults" in first.stderr
    again = cli(["coordinators-list", "-o", "json"], env=env)
    assert again.exit_code == 0 and "new:" not in again.stderr
    assert again.json() == first.json()


def test_a_named_engine_directory_without_an_engine_is_an_error(cli, tmp_path):
    """A mistyped --engine-dir is not a brand-new engine with every coordinator Ready."""
    typo = tmp_path / "engnie"
    result = cli(["coordinator-stats", "--engine-dir", typo, "-o", "json"])
    assert result.exit_code == 2 and f"no engine in {typo} (--engine-dir)" in result.stderr
    assert result.stdout == "" and not typo.exists()
    result = cli(["coordinator-stats", "-o", "json"], env={"PULSAR_TXN_ENGINE_DIR": str(typo)})
    assert result.exit_code == 2 and f"no engine in {typo} (environment)" in result.stderr


def test_a_namespace_that_does_not_exist_is_an_error(cli, tmp_path):
    """A typo in -n is not "0 of 0 held back" or "(none)" with exit 0."""
    engine = tmp_path / "engine"
    assert cli(["engine", "init", "--engine-dir", engine]).exit_code == 0
    for args in (["stuck-readers", "-n", "nosuch/ns"], ["subscriptions", "-n", "nosuch/ns"]):
        result = cli([*args, "--engine-dir", engine])
        assert result.exit_code == 4, (args, result.stdout)
        assert "Namespace does not exist" in result.stderr and "check the namespace" in result.stderr
    empty = cli(["stuck-readers", "-n", "public/default", "--engine-dir", engine])
    assert empty.exit_code == 0 and "nothing to check: public/default has no topics" in empty.stdout
