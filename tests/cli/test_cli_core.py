"""The CLI core: exit codes, tracebacks only with --debug, global options anywhere, fast start."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from pulsar_txn_cli import codec
from pulsar_txn_cli.errors import ExitCode
from tests.conftest import assert_no_crash

SINGLE = codec.encode_single(codec.TcRecord(metadata_op=0, txnid_most_bits=1, txnid_least_bits=2))
# Modules that `pulsar-txn --help` must not load: the protobuf runtime and generated modules,
# the HTTP client, Spark and the SQLite-backed engine.
HEAVY = (
    "google.protobuf",
    "pulsar_txn_cli.codec.gen",
    "httpx",
    "pyspark",
    "pyarrow",
    "pandas",
    "sqlite3",
    "pulsar_txn_cli.engine",
)


# ---------------------------------------------------------------- exit codes


@pytest.mark.parametrize(
    "args, message",
    [
        (["no-such-command"], "No such command 'no-such-command'"),
        (["decode", "--no-such-flag"], "No such option: --no-such-flag"),
        (["decode", "--hex"], "Option '--hex' requires an argument"),
        (["-o", "yaml", "decode"], "Invalid value for '-o' / '--output'"),
        (["decode", "-o", "yaml"], "Invalid value for '-o' / '--output'"),
    ],
)
def test_usage_errors_exit_2_with_one_message(cli, args, message):
    result = cli(args)
    assert result.exit_code == ExitCode.USAGE == 2
    assert message in result.stderr
    assert_no_crash(result)
    assert result.stdout == ""


def test_data_errors_exit_3(cli):
    result = cli(["decode", "--hex", "0e", "--log", "tc"])
    assert result.exit_code == 3
    assert_no_crash(result)


def test_version(cli):
    result = cli(["-V"])
    assert result.exit_code == 0 and result.stdout.startswith("pulsar-txn ")


def test_help_exits_0(cli):
    result = cli(["--help"])
    assert result.exit_code == 0 and "decode" in result.stdout


# ---------------------------------------------------------------- tracebacks


@pytest.fixture
def broken_decoder(monkeypatch):
    """A stand-in for a bug (a bug cannot be had for real): the decoder raises a KeyError."""

    def broken(data, log):
        raise KeyError("boom")

    monkeypatch.setattr(codec, "decode_entry", broken)


def test_unexpected_error_is_one_line_without_debug(cli, broken_decoder):
    result = cli(["decode", "--hex", SINGLE.hex(), "--log", "tc"])
    assert result.exit_code == ExitCode.UNEXPECTED == 1
    assert "Traceback" not in result.stderr
    assert "error: unexpected KeyError; rerun with --debug for the details" in result.stderr


@pytest.mark.parametrize("where", ["before", "after"])
def test_debug_shows_the_traceback(cli, broken_decoder, where):
    args = ["decode", "--hex", SINGLE.hex(), "--log", "tc"]
    result = cli(["--debug", *args] if where == "before" else [*args, "--debug"])
    assert result.exit_code == 1
    assert "Traceback (most recent call last)" in result.stderr and "KeyError: 'boom'" in result.stderr


def test_debug_shows_the_traceback_of_a_project_error(cli):
    result = cli(["decode", "--hex", "0e", "--log", "tc", "--debug", "--strict"])
    assert result.exit_code == 3
    assert "Traceback" in result.stderr and "DataError" in result.stderr


# ---------------------------------------------------------------- global options


@pytest.mark.parametrize(
    "args",
    [
        ["-o", "json", "decode", "--hex", SINGLE.hex(), "--log", "tc"],
        ["decode", "-o", "json", "--hex", SINGLE.hex(), "--log", "tc"],
        ["decode", "--hex", SINGLE.hex(), "--log", "tc", "--output", "json"],
        ["-o", "jsonl", "decode", "--hex", SINGLE.hex(), "--log", "tc", "-o", "json"],  # the later one wins
    ],
)
def test_output_option_before_or_after_the_subcommand(cli, args):
    result = cli(args)
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)[0]["records"][0]["txnId"] == "(1,2)"


def test_no_color_and_quiet_anywhere(cli):
    for args in (["--no-color", "-q", "decode"], ["decode", "--no-color", "-q"]):
        result = cli([*args, "--hex", SINGLE.hex(), "--log", "tc"], env={"NO_COLOR": "1"})
        assert result.exit_code == 0 and result.stderr == ""
        assert "\x1b[" not in result.stdout and "(1,2)" in result.stdout


# ---------------------------------------------------------------- fast start


def _modules_after(code: str) -> set[str]:
    script = textwrap.dedent(code) + "\nimport sys, json\nprint(json.dumps(sorted(sys.modules)))\n"
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return set(json.loads(result.stdout.splitlines()[-1]))


def _heavy(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY))


def test_importing_the_app_loads_no_heavy_module():
    assert _heavy(_modules_after("import pulsar_txn_cli.cli.app")) == []


def test_help_loads_no_heavy_module():
    # Every command module is imported by app.py, so its top-level imports are covered above;
    # this also covers what building and rendering the help pulls in.
    code = """
        import contextlib, io
        from pulsar_txn_cli.cli.main import run

        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            assert run(["--help"]) == 0
            assert run(["decode", "--help"]) == 0
    """
    assert _heavy(_modules_after(code)) == []


def test_an_admin_command_loads_no_heavy_module_nor_a_parsing_layer(tmp_path):
    """A command's start is what every script's call pays: no pydantic (Typer 0.29 built a
    TypeAdapter for each parameter), no YAML parser without a pulsarctl config to read."""
    code = f"""
        import contextlib, io, os, socket
        os.environ.update(HOME={str(tmp_path)!r}, PULSARCONFIG={str(tmp_path / "none")!r})
        from pulsar_txn_cli.cli.main import run

        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            url = f"http://127.0.0.1:{{probe.getsockname()[1]}}"
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            assert run(["coordinator-stats", "--admin-url", url, "--request-timeout", "1"]) == 4
    """
    loaded = _modules_after(code)
    assert "pulsar_txn_cli.transport.http_pool" in loaded  # it did reach its first request
    assert _heavy(loaded) == [] and not {"pydantic", "yaml"} & loaded, sorted({"pydantic", "yaml"} & loaded)


def test_python_dash_m_runs_the_cli():
    result = subprocess.run(
        [sys.executable, "-m", "pulsar_txn_cli", "--version"], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0 and result.stdout.startswith("pulsar-txn ")
