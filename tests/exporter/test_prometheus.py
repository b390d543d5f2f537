"""A real Prometheus (Debian's, installed by ./dev) scrapes a real `pulsar-txn exporter` process,
and every query of the shipped Grafana dashboard answers through Prometheus' HTTP API."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from tests.exporter import scenario
from tests.exporter.test_exporter import DASHBOARD, dashboard_queries

DEADLINE_S = 60


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def exporter(cli, monkeypatch, tmp_path):
    scenario.isolate(monkeypatch, tmp_path)
    directory = scenario.downgrade_in_progress(cli, tmp_path / "engine")
    log = (tmp_path / "exporter.log").open("w+")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pulsar_txn_cli",
            "exporter",
            "--port",
            "0",
            "--interval",
            "1",
            "--engine-dir",
            str(directory),
        ],
        stdout=subprocess.DEVNULL,
        stderr=log,
        env=os.environ,
    )
    try:
        yield _wait_for(lambda: re.search(r"on (http://\S+)/metrics", Path(log.name).read_text()), proc).group(1)
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.fixture
def prometheus(exporter, tmp_path):
    binary = shutil.which("prometheus")
    assert binary, "prometheus is not installed: `./dev setup` installs it (its Prometheus step, Debian's package)"
    port = free_port()
    config = tmp_path / "prometheus.yml"
    target = urllib.parse.urlsplit(exporter).netloc
    config.write_text(
        f"global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: pulsar-txn\n"
        f"    static_configs:\n      - targets: ['{target}']\n"
    )
    log = (tmp_path / "prometheus.log").open("w")
    proc = subprocess.Popen(
        [
            binary,
            f"--config.file={config}",
            f"--storage.tsdb.path={tmp_path / 'tsdb'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=log,
        stderr=log,
    )
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(10)


def query(prometheus: str, expr: str) -> dict:
    url = f"{prometheus}/api/v1/query?{urllib.parse.urlencode({'query': expr})}"
    with urllib.request.urlopen(url, timeout=5) as answer:
        return json.load(answer)


def _wait_for(probe, proc=None):
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        assert proc is None or proc.poll() is None, "the process exited"
        try:
            found = probe()
        except OSError:
            found = None
        if found:
            return found
        time.sleep(0.2)
    raise AssertionError(f"not seen within {DEADLINE_S}s")


@pytest.mark.tools
def test_prometheus_scrapes_the_verdict_and_the_dashboard_answers(prometheus):
    def waiting():
        result = query(prometheus, 'pulsar_txn_downgrade_verdict{verdict="WAIT"}')["data"]["result"]
        return result and result[0]["value"][1] == "1" and result

    [series] = _wait_for(waiting)
    assert series["metric"]["job"] == "pulsar-txn"
    assert query(prometheus, "pulsar_txn_exporter_up")["data"]["result"][0]["value"][1] == "1"
    for expr in dashboard_queries(json.loads(DASHBOARD.read_text())):
        answer = query(prometheus, expr)
        assert answer["status"] == "success", (expr, answer)
        assert answer["data"]["result"], f"no series for the dashboard's query {expr}"
