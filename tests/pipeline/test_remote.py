"""The parts of s3a:// / hdfs:// handling that need no JVM (remote.py); tests/pipeline/test_s3a.py
runs the rest against a real S3-compatible server."""

from __future__ import annotations

import pytest

from pulsar_txn_cli.errors import UsageError
from pulsar_txn_cli.pipeline import choose_engine, remote


def test_urls_and_local_paths():
    assert remote.split(["s3a://b/p/", "file:///tmp/a%20b.jsonl", "dumps/", "HDFS://nn/x"]) == (
        ["/tmp/a b.jsonl", "dumps/"],
        ["s3a://b/p/", "HDFS://nn/x"],
    )
    assert not remote.is_url("C.jsonl") and not remote.is_url("file:/x") and remote.is_url("s3a:/b/x")


def test_the_s3a_connector_is_added_unless_named(monkeypatch):
    monkeypatch.setattr(remote, "hadoop_version", lambda: "3.5.0")
    conf, said = remote.with_connector(["s3a://b/"], {"spark.jars.packages": "org.example:x:1"})
    assert (
        conf["spark.jars.packages"] == "org.example:x:1,org.apache.hadoop:hadoop-aws:3.5.0"
        and "hadoop-aws:3.5.0" in said
    )
    assert remote.with_connector(["s3a://b/"], {"spark.jars": "/opt/hadoop-aws-3.5.0.jar"}) == (
        {"spark.jars": "/opt/hadoop-aws-3.5.0.jar"},
        None,
    )
    assert remote.with_connector(["hdfs://nn/x"], {}) == ({}, None)


def test_the_hadoop_version_comes_from_the_pyspark_installation():
    assert remote.hadoop_version().count(".") == 2


def test_listing_order_is_the_local_walk_order():
    root = "s3a://b/d/"
    names = [root + n for n in ("z.jsonl", "sub/a.parquet", "a.txt", "sub/deeper/x", "sub/b")]
    assert sorted(names, key=lambda n: remote._walk_order(root, n)) == [
        root + n for n in ("a.txt", "z.jsonl", "sub/a.parquet", "sub/b", "sub/deeper/x")
    ]


def test_urls_pick_spark_and_refuse_the_local_engine():
    assert choose_engine("auto", None, urls=True) == "spark"
    with pytest.raises(UsageError, match="use --engine spark or auto"):
        choose_engine("local", None, urls=True)


def test_html_and_dump_parquet_rules(cli, mixed):
    tmp, entries = mixed
    from .conftest import write_jsonl

    source = write_jsonl(tmp / "d.jsonl", entries)
    done = cli(["analyze", source, "--html", "s3a://b/report.html"])
    assert done.exit_code == 2 and "--html writes a local file" in done.stderr
    done = cli(["analyze", "s3a://b/x/", "--dump-parquet", str(tmp / "out.parquet")])
    assert done.exit_code == 2 and "--dump-parquet converts local inputs" in done.stderr
    done = cli(["analyze", source, "--dump-parquet", f"file://{tmp}/out.parquet"])
    assert done.exit_code == 0 and (tmp / "out.parquet").read_bytes()[:4] == b"PAR1"
