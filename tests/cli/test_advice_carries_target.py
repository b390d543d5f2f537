"""Suggested commands are safe to paste: each carries the target it was made for."""

import shlex

from pulsar_txn_cli.engine import server
from tests.conftest import assert_no_crash


def _blocked(cli, target):
    assert cli(["set-txn-tc-batch-log", "--enable", *target]).exit_code == 0
    return cli(["downgrade", "check", *target, "--checkpoint", target[-1] + "-cp.json"])


def test_fix_lines_under_admin_url_name_the_cluster(cli, tmp_path):
    engine = tmp_path / "engine"
    assert cli(["engine", "init", "--engine-dir", engine]).exit_code == 0
    with server.start(str(engine)) as served:
        result = cli(["set-txn-tc-batch-log", "--enable", "--admin-url", served.url])
        assert result.exit_code == 0
        result = cli(["downgrade", "check", "--admin-url", served.url, "--checkpoint", tmp_path / "cp.json"])
    assert result.exit_code == 6, result.stderr
    fixes = [line.removeprefix("fix: ") for line in result.stdout.splitlines() if line.startswith("fix: ")]
    assert fixes, result.stdout
    for fix in fixes:
        words = shlex.split(fix)
        assert words[words.index("--admin-url") + 1] == served.url, fix


def test_fix_lines_under_engine_dir_name_the_engine(cli, tmp_path):
    engine = tmp_path / "my engine"  # a space: the flag is quoted for the shell
    assert cli(["engine", "init", "--engine-dir", engine]).exit_code == 0
    assert cli(["set-txn-tc-batch-log", "--enable", "--engine-dir", engine]).exit_code == 0
    result = cli(["downgrade", "check", "--engine-dir", engine, "--checkpoint", tmp_path / "cp.json", "-o", "json"])
    assert result.exit_code == 6
    for fix in result.json()["fixes"]:
        words = shlex.split(fix)
        assert words[0] != "pulsar-txn" or words[words.index("--engine-dir") + 1] == str(engine), fix


def test_engine_commands_refuse_when_the_environment_names_a_cluster(cli, tmp_path):
    env = {"PULSAR_TXN_ADMIN_URL": "http://broker.example:8080", "XDG_DATA_HOME": str(tmp_path / "data")}
    refused = cli(["engine", "simulate", "--transactions", "2"], env=env)
    assert refused.exit_code == 2
    assert "PULSAR_TXN_ADMIN_URL names a cluster (http://broker.example:8080)" in refused.stderr
    assert not (tmp_path / "data").exists()  # nothing was created on the default engine
    chosen = cli(["engine", "simulate", "--transactions", "2", "--engine-dir", tmp_path / "e"], env=env)
    assert chosen.exit_code == 0, chosen.stderr
    assert f"engine: {tmp_path / 'e'}" in chosen.stderr


def test_topic_stats_advice_on_an_engine_becomes_a_command_the_engine_answers(cli, tmp_path):
    """pulsar-admin cannot reach an engine directory: its `topics stats` becomes the topic's transaction
    buffer stats, which run as printed on that engine."""
    from types import SimpleNamespace

    from pulsar_txn_cli.cli.advice import carry_target

    engine = tmp_path / "my engine"
    assert cli(["engine", "simulate", "-n", "5", "--engine-dir", engine]).exit_code == 0
    flags = SimpleNamespace(
        admin_url=None, context=None, engine_dir=str(engine), token_file=None, tls_trust_cert_path=None
    )
    target = SimpleNamespace(kind="engine", source="flags", engine_dir=str(engine), url=None)
    env = SimpleNamespace(target=flags, chosen_target=target)
    topic = "persistent://public/default/sim-topic-0"
    text = carry_target(f"check its consumers and backlog (`pulsar-admin topics stats {topic}`)", env)
    assert "pulsar-admin" not in text
    printed = text.split("`")[1]
    assert printed.startswith(f"pulsar-txn transaction-buffer-stats -t {topic} --engine-dir ")
    ran = cli(shlex.split(printed)[1:])
    assert ran.exit_code == 0, ran.stderr


def _pasted(line: str) -> list[str]:
    """The `pulsar-txn …` command quoted in a line, as the shell would split it."""
    return shlex.split(line.split("`pulsar-txn ", 1)[1].split("`", 1)[0])


def test_a_check_on_a_named_checkpoint_suggests_resetting_that_file(cli, tmp_path):
    """A foreign checkpoint named with --checkpoint: the advice to start over resets that file, as printed
    (without it, `downgrade reset` would forget the target's default checkpoint, another file)."""
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    named = tmp_path / "shared checkpoint.json"  # a space: quoted for the shell
    for engine in (ours, theirs):
        assert cli(["engine", "init", "--engine-dir", engine]).exit_code == 0
    assert cli(["downgrade", "check", "--engine-dir", theirs, "--checkpoint", named]).exit_code == 0
    result = cli(["downgrade", "check", "--engine-dir", ours, "--checkpoint", named, "-o", "json"])
    assert result.exit_code == 6, result.stderr
    problem = next(p for p in result.json()["problems"] if "belongs to" in p)
    words = _pasted(problem)
    assert words[:2] == ["downgrade", "reset"], problem
    assert words[words.index("--checkpoint") + 1] == str(named), problem
    assert words[words.index("--engine-dir") + 1] == str(ours), problem
    reset = cli(words + ["-o", "json"])
    assert reset.exit_code == 0, reset.stderr
    assert reset.json()["removed"] is True and not named.exists()
    assert cli(["downgrade", "check", "--engine-dir", ours, "--checkpoint", named]).exit_code == 0


def test_a_damaged_checkpoint_names_the_file_to_remove(cli, tmp_path):
    engine, named = tmp_path / "engine", tmp_path / "cp.json"
    assert cli(["engine", "init", "--engine-dir", engine]).exit_code == 0
    named.write_text("{not json")
    result = cli(["downgrade", "check", "--engine-dir", engine, "--checkpoint", named])
    assert result.exit_code == 6, result.stderr
    assert_no_crash(result)
    problem = next(line for line in result.stdout.splitlines() if line.startswith("problem: checkpoint"))
    assert problem.endswith(f"fix it, or remove it to start over: rm {named}"), problem
    assert "downgrade reset" not in result.stdout, result.stdout
    assert named.read_text() == "{not json"  # a file that is not a checkpoint is never overwritten
