"""Small error paths: each one clear sentence with its exit code, before any work."""

import pytest


def test_output_format_choices_are_named(cli, tmp_path):
    result = cli(["coordinators-list", "-o", "yaml", "--engine-dir", tmp_path / "e"])
    assert result.exit_code == 2 and "'yaml' is not one of 'table', 'json', 'jsonl'" in result.stderr


def test_a_port_out_of_range_is_a_usage_error(cli, tmp_path):
    result = cli(["engine", "serve", "--port", "99999", "--engine-dir", tmp_path / "e"])
    assert result.exit_code == 2 and "--port" in result.stderr and "65535" in result.stderr
    assert "Overflow" not in result.stderr


@pytest.mark.parametrize("url", ["http://", "https:///admin", "http://:8080"])
def test_an_admin_url_without_a_host(cli, url):
    result = cli(["coordinators-list", "--admin-url", url])
    assert result.exit_code == 2 and f"admin URL {url!r} (flags) names no host" in result.stderr


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("http://b1:8080,b2:8080", "names several hosts; give one broker's web service"),
        ("http://broker:99999", "has a port that is not a number from 1 to 65535"),
        ("http://broker:web", "has a port that is not a number from 1 to 65535"),
    ],
)
def test_an_admin_url_pulsar_txn_cannot_call_is_a_usage_error(cli, url, said):
    """Before a request: a multi-host or a bad port was a transport failure (exit 4) quoting urllib."""
    result = cli(["coordinators-list", "--admin-url", url])
    assert result.exit_code == 2, result.stderr
    assert result.stderr.strip() == f"error: admin URL {url!r} (flags) {said}" + (
        " (any broker answers for the whole cluster) or the load balancer in front of them" if "," in url else ""
    )


def test_a_refused_connection_names_the_url_once(cli):
    import socket

    with socket.socket() as s:  # a port nothing listens on: bound, never listening
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}"
        result = cli(["coordinators-list", "--admin-url", url])
    assert result.exit_code == 4, result.stderr
    assert result.stderr.count(url) == 2, result.stderr  # the target line and the error, once each
    assert f"error: cannot connect to cluster {url} (" in result.stderr


def test_a_file_given_as_the_engine_directory(cli, tmp_path):
    afile = tmp_path / "afile"
    afile.write_text("")
    for args in (["coordinators-list"], ["engine", "simulate", "--transactions", "2"]):
        result = cli([*args, "--engine-dir", afile])
        assert result.exit_code == 2, (args, result.stderr)
        assert f"{afile}" in result.stderr and "is a file; give a directory" in result.stderr
        assert "created with the defaults" not in result.stderr


def test_html_into_a_directory_is_refused_before_the_work(cli, tmp_path):
    from pathlib import Path

    import pulsar_txn_cli

    sample = Path(pulsar_txn_cli.__file__).parent / "samples" / "txn-logs.jsonl"  # the packaged sample dump
    assert sample.is_file()
    result = cli(["analyze", sample, "--html", tmp_path, "--engine", "local"])
    assert result.exit_code == 2 and f"--html {tmp_path} is a directory" in result.stderr
    assert "engine: local" not in result.stderr  # refused before the work started


@pytest.mark.parametrize(
    "args",
    [
        ["coordinator-stats", "-c", "9"],
        ["slow-transactions", "-c", "9"],
        ["coordinator-internal-stats", "-c", "9"],
    ],
)
def test_a_coordinator_id_the_target_does_not_have_names_the_ids_it_has(cli, tmp_path, args):
    """A 404 for a coordinator id out of range says which ids there are (an engine has 4), with the command that
    lists them; an id in range keeps Pulsar's own answer."""
    assert cli(["engine", "init", "--engine-dir", tmp_path / "e"]).exit_code == 0
    result = cli([*args, "--engine-dir", tmp_path / "e"])
    assert result.exit_code == 4, result.stderr
    wrong = args[-1]
    said = f"has no coordinator {wrong}: its 4 coordinators are 0 to 3 (`pulsar-txn coordinators-list --engine-dir"
    assert said in result.stderr and "` shows them)" in result.stderr
    assert cli(["coordinator-stats", "-c", "3", "--engine-dir", tmp_path / "e"]).exit_code == 0
