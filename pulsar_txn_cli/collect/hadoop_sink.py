"""A collect destination on a Hadoop file system (s3a://, hdfs://...), as sink.py describes.

Hadoop's connectors live in the JVM, so a local Spark (one core, no executors' work) is started
for its FileSystem, with the S3A connector added as `analyze` adds it (pipeline/remote.py) and the
settings given with --spark-conf; credentials come from where Hadoop takes them and are never read
or printed here. Each dump is written to a local temporary file, then moved: an S3 object appears
whole when its upload completes. Object stores cannot append, so each completed ledger is recorded
in a small file of its own (`_collect/done/<key>.json`), after its dump.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

from pulsar_txn_cli.collect.layout import (
    MANIFEST_DIR,
    check_header,
    header_text,
    parse_header,
    relative_name,
    write_dump,
)
from pulsar_txn_cli.errors import ConnectionFailed, PulsarTxnError

MASTER = "local[1]"


class HadoopDir:
    def __init__(self, url: str, fmt: str, spark_conf: dict, note):
        self.root, self.fmt, self.conf, self.note = url.rstrip("/"), fmt, spark_conf, note
        self.spark = self._session = self._tmp = None

    def __str__(self) -> str:
        return self.root

    def __enter__(self) -> "HadoopDir":
        from pulsar_txn_cli.pipeline import remote, spark_job

        spark_job.require_spark(needs=f"--out {self.root}", otherwise=", or collect into a local directory")
        conf, said = remote.with_connector([self.root], self.conf)
        if said:
            self.note(said)
        self._session = spark_job.Session(MASTER, conf, ship=False)
        self.spark = self._session.__enter__()
        self._tmp = tempfile.mkdtemp(prefix="pulsar-txn-collect-")
        return self

    def __exit__(self, *exc) -> None:
        if self._tmp:
            shutil.rmtree(self._tmp, ignore_errors=True)
        if self._session is not None:
            self._session.__exit__(*exc)

    def _url(self, relative: str) -> str:
        return f"{self.root}/{relative}"

    def _upload(self, local: Path, relative: str) -> None:
        from pulsar_txn_cli.pipeline import remote

        try:
            remote.upload(self.spark, str(local), self._url(relative))
        finally:
            local.unlink(missing_ok=True)

    def _put(self, local: Path, relative: str) -> None:
        """_upload; OSError when the file system refuses (the ledger is then a failed one)."""
        from pulsar_txn_cli.pipeline import spark_job

        try:
            self._upload(local, relative)
        except Exception as exc:  # Py4JJavaError: the connector's own sentence
            raise OSError(f"{self._url(relative)}: {spark_job.failure_summary(exc)}") from None

    @contextmanager
    def _reaching(self):
        """The destination's own failures (no such bucket, no credentials, no server) as one sentence, exit 4."""
        from pulsar_txn_cli.pipeline import spark_job

        try:
            yield
        except PulsarTxnError:
            raise
        except Exception as exc:
            log = f"Spark's own log: {self._session.jvm_log}; " if self._session.jvm_log else ""
            raise ConnectionFailed(
                f"cannot use --out {self.root}: {spark_job.failure_summary(exc)}",
                hint=f"{log}Hadoop takes its settings from --spark-conf spark.hadoop.fs.*, "
                "and S3 credentials from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY",
            ) from None

    def _local(self, name: str) -> Path:
        fd, path = tempfile.mkstemp(prefix=".", suffix=f".{name}", dir=self._tmp)
        os.close(fd)
        return Path(path)

    def begin(self, identity: str, target: str) -> dict[str, dict]:
        """Claim the destination for this cluster; the ledgers a previous run completed, by key."""
        from pulsar_txn_cli.pipeline import remote

        with self._reaching():
            header = remote.read_bytes(self.spark, self._url(f"{MANIFEST_DIR}/collect.json"))
            if header is not None:
                check_header(self.root, parse_header(header), identity, self.fmt)
            else:
                local = self._local("collect.json")
                local.write_text(header_text(identity, target, self.fmt), encoding="utf-8")
                self._upload(local, f"{MANIFEST_DIR}/collect.json")
            return self._completed()

    def _completed(self) -> dict[str, dict]:
        from pulsar_txn_cli.pipeline import remote

        present = set(remote.list_files(self.spark, self.root))
        done = {}
        for url in remote.list_files(self.spark, self._url(f"{MANIFEST_DIR}/done")):
            record = parse_header(remote.read_bytes(self.spark, url))
            if record and isinstance(record.get("key"), str) and self._url(record.get("file", "")) in present:
                done[record["key"]] = record
        return done

    def write_ledger(self, task, entries) -> str:
        """Write one ledger's dump locally, then move it to the destination; its path relative to the root."""
        relative = relative_name(task, self.fmt)
        local = self._local(f"ledger-{task.ledger_id}.{self.fmt}")
        try:
            write_dump(local, task, entries, self.fmt)
        except BaseException:
            local.unlink(missing_ok=True)
            raise
        self._put(local, relative)
        return relative

    def record(self, record: dict) -> None:
        """Mark a ledger completed (after its dump is in place): one small file of its own."""
        local = self._local("done.json")
        local.write_text(json.dumps(record, separators=(",", ":")) + "\n", encoding="utf-8")
        self._put(local, f"{MANIFEST_DIR}/done/{quote(record['key'], safe='')}.json")
