"""`pulsar-txn analyze` through the real entry point (engine local)."""

from __future__ import annotations

import sys

from .conftest import TC_ML, write_jsonl
from tests.conftest import assert_no_crash


def test_json_has_the_issue_keys_and_exit_3_on_decode_errors(cli, mixed):
    tmp, entries = mixed
    result = cli(["analyze", write_jsonl(tmp / "d.jsonl", entries), "--engine", "local", "-o", "json"])
    assert result.exit_code == 3, result.stderr
    report = result.json()
    keys = {
        "name",
        "log",
        "entries",
        "batchedEntries",
        "unbatchedEntries",
        "records",
        "bytes",
        "lastBatchedLedgerId",
        "decodeErrors",
        "recordsPerEntry",
        "entrySizeBytes",
        "ops",
        "transactions",
        "entriesSaved",
        "ledgers",
    }
    for ml in report["managedLedgers"]:
        assert keys <= set(ml)
        for ledger in ml["ledgers"]:
            assert {"ledgerId", "entries", "batchedEntries", "records", "bytes"} <= set(ledger)
    assert report["totals"]["entries"] == len(entries)
    assert "1 of 10 entries could not be decoded" in result.stderr


def test_clean_input_exits_0_with_table_bars(cli, tmp_path, mixed):
    _, entries = mixed
    clean = [e for e in entries if e[1] != 4]
    result = cli(["analyze", write_jsonl(tmp_path / "c.jsonl", clean), "--engine", "local"])
    assert result.exit_code == 0, result.stderr
    assert "Records per entry" in result.stdout and "█" in result.stdout
    assert TC_ML in result.stdout


def test_html_report_is_self_contained(cli, tmp_path, mixed):
    _, entries = mixed
    out = tmp_path / "report.html"
    result = cli(["analyze", write_jsonl(tmp_path / "d.jsonl", entries), "--engine", "local", "--html", str(out), "-q"])
    assert result.exit_code == 3
    html = out.read_text()
    assert html.startswith("<!DOCTYPE html>") and html.count("<svg") >= 3
    assert "src=" not in html and "href=" not in html and html.count("<script>") == 1  # the inline table filter
    assert TC_ML in html and "4:2" in html


def test_dump_parquet_then_analyze_the_parquet(cli, tmp_path, mixed):
    _, entries = mixed
    out = tmp_path / "d.parquet"
    source = write_jsonl(tmp_path / "d.jsonl", entries)
    converted = cli(["analyze", source, "--dump-parquet", str(out)])
    assert converted.exit_code == 0 and "wrote 10 entries" in converted.stderr
    a = cli(["analyze", source, "--engine", "local", "-o", "json"]).json()
    b = cli(["analyze", str(out), "--engine", "local", "-o", "json"]).json()
    assert a["managedLedgers"] == b["managedLedgers"]


def test_usage_errors(cli, tmp_path, mixed):
    _, entries = mixed
    source = write_jsonl(tmp_path / "d.jsonl", entries)
    assert cli(["analyze", str(tmp_path / "nope")]).exit_code == 2
    bad_conf = cli(["analyze", source, "--engine", "spark", "--spark-conf", "novalue"])
    assert bad_conf.exit_code == 2 and "KEY=VALUE" in bad_conf.stderr
    assert cli(["analyze", source, "--engine", "flink"]).exit_code == 2
    assert_no_crash(bad_conf)


def test_spark_without_pyspark_says_how_to_install(cli, tmp_path, mixed, monkeypatch):
    # A real failed import: sys.modules[name] = None makes `import pyspark` raise ImportError.
    _, entries = mixed
    monkeypatch.setitem(sys.modules, "pyspark", None)
    result = cli(["analyze", write_jsonl(tmp_path / "d.jsonl", entries), "--engine", "spark"])
    assert result.exit_code == 2
    assert "pip install 'pulsar-txn[spark]'" in result.stderr and "--engine local" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    # auto falls back to the local engine
    auto = cli(["analyze", str(tmp_path / "d.jsonl"), "-o", "json"])
    assert auto.exit_code == 3 and "engine: local" in auto.stderr


def test_spark_without_java_says_how_to_install(cli, tmp_path, mixed, monkeypatch):
    _, entries = mixed
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.delenv("JAVA_HOME", raising=False)
    result = cli(["analyze", write_jsonl(tmp_path / "d.jsonl", entries), "--engine", "spark"])
    assert result.exit_code == 2 and "Java 17" in result.stderr and "--engine local" in result.stderr
