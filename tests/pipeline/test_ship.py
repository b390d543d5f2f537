"""What a Spark cluster's executors get shipped (pipeline/ship.py), checked without a cluster;
tests/pipeline/test_spark_cluster.py runs it on a real one."""

from __future__ import annotations

import subprocess
import sys
import zipfile

from pulsar_txn_cli import codec, pipeline
from pulsar_txn_cli.pipeline import facts, ship

from .conftest import TC_ML, lifecycle


def test_the_zip_holds_python_sources_only_and_is_built_once_per_content(tmp_path):
    first = ship.build(cache_dir=str(tmp_path))
    again = ship.build(cache_dir=str(tmp_path))
    assert first == again and len(list(tmp_path.iterdir())) == 1
    names = zipfile.ZipFile(first.zip_path).namelist()
    assert "pulsar_txn_cli/pipeline/spark_tasks.py" in names and "google/protobuf/message.py" in names
    assert "google/" in names  # zipimport finds the namespace package by its entry
    assert not [n for n in names if n.endswith((".so", ".pyc"))]
    modules = dict(first.compiled)
    assert modules[ship.SCANNER] == facts.NATIVE.__file__ and "orjson" in modules
    assert ship.SCANNER not in dict(ship.build(native=False, cache_dir=str(tmp_path)).compiled)


def test_a_python_without_site_packages_decodes_from_the_zip_alone(tmp_path):
    """No protobuf, no orjson, no scanner: the shipped zip's pure-Python path gives the same facts."""
    shipment = ship.build(cache_dir=str(tmp_path))
    data = codec.encode_batch(lifecycle(1) + lifecycle(2))
    code = (
        f"import sys; sys.path.insert(0, {shipment.zip_path!r})\n"
        "from pulsar_txn_cli.pipeline import facts\n"
        "assert facts.NATIVE is None and 'site-packages' not in facts.codec.logs.api_pb2.__file__\n"
        "from google.protobuf.internal import api_implementation\n"
        f"print(api_implementation.Type(), facts.entry_facts({TC_ML!r}, 3, 0, {data!r}, None, None))"
    )
    done = subprocess.run([sys.executable, "-I", "-S", "-c", code], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    kind, _, shipped = done.stdout.strip().partition(" ")
    assert kind == "python"
    assert shipped == repr(facts.entry_facts(TC_ML, 3, 0, data, None, None))


def test_a_scanner_built_for_another_python_is_not_loaded(monkeypatch):
    monkeypatch.setattr(facts, "NATIVE", None)
    said = ship.load_compiled([(ship.SCANNER, "_scan.cpython-399-x86_64-linux-gnu.so")])
    assert said.startswith("pure-Python (the shipped scanner does not load") and facts.NATIVE is None
    assert ship.load_compiled([]) == "pure-Python (no native scanner shipped)"


def test_auto_is_local_unless_a_spark_master_is_given():
    assert pipeline.choose_engine("auto") == "local"
    assert pipeline.choose_engine("auto", "spark://10.0.0.1:7077") == "spark"
    assert pipeline.choose_engine("local", "spark://10.0.0.1:7077") == "local"


def test_analyze_defaults_to_the_local_runner(cli, mixed):
    tmp, entries = mixed
    from .conftest import write_jsonl

    done = cli(["analyze", write_jsonl(tmp / "d.jsonl", entries), "-o", "json"])
    assert done.exit_code == 3 and done.stderr.startswith("engine: local (native scanner)"), done.stderr
