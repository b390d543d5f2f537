"""Inputs and outputs on Hadoop file systems (s3a://, hdfs://...), through Spark's JVM only.

Hadoop's connectors (S3A for s3a://) live in the JVM, so these URLs need the Spark runner: the
driver lists and sniffs them with Hadoop's FileSystem (py4j), the executors get their bytes from
Spark's own readers (Parquet with its row index, text files whole as binaryFile). Credentials come
from where Hadoop and Spark take them (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY in the driver's
environment, spark.hadoop.fs.s3a.* settings); the tool never reads or prints them. file:// URLs are
plain local paths.
"""

from __future__ import annotations

import os
import re
from urllib.parse import unquote, urlparse

from pulsar_txn_cli.errors import EmptyInput, UsageError

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):/")
S3A_PACKAGE = "org.apache.hadoop:hadoop-aws"


def is_url(name: str) -> bool:
    """A Hadoop file-system URL (any scheme but file:)."""
    match = _SCHEME.match(name)
    return bool(match) and match.group(1).lower() != "file"


def local_path(name: str) -> str:
    """file:///x -> /x; anything else unchanged."""
    if name.lower().startswith("file:"):
        return unquote(urlparse(name).path)
    return name


def split(names: list[str]) -> tuple[list[str], list[str]]:
    """(local paths, Hadoop URLs) of the inputs, file:// URLs made local paths."""
    local = [local_path(n) for n in names if not is_url(n)]
    return local, [n for n in names if is_url(n)]


def hadoop_version() -> str:
    """The Hadoop version of the pyspark installation (its hadoop-client-api jar)."""
    import pyspark

    jars = os.path.join(os.path.dirname(pyspark.__file__), "jars")
    for name in sorted(os.listdir(jars)):
        match = re.fullmatch(r"hadoop-client-api-(.+)\.jar", name)
        if match:
            return match.group(1)
    raise UsageError(f"cannot tell the Hadoop version of PySpark: no hadoop-client-api jar in {jars}")


def with_connector(urls: list[str], conf: dict) -> tuple[dict, str | None]:
    """conf plus the S3A connector (spark.jars.packages, resolved by Spark from Maven Central or
    the local caches) when an s3a:// URL needs it and the settings do not name hadoop-aws already;
    and a sentence saying so (None when nothing was added)."""
    if not any(u.lower().startswith("s3a:") for u in urls):
        return conf, None
    if any(
        S3A_PACKAGE in conf.get(key, "") or "hadoop-aws" in conf.get(key, "")
        for key in ("spark.jars.packages", "spark.jars")
    ):
        return conf, None
    package = f"{S3A_PACKAGE}:{hadoop_version()}"
    packages = ",".join(p for p in (conf.get("spark.jars.packages"), package) if p)
    return {
        **conf,
        "spark.jars.packages": packages,
    }, f"s3a:// needs Hadoop's S3A connector: added spark.jars.packages {package}"


def _fs(spark, url: str):
    jvm = spark.sparkContext._jvm
    path = jvm.org.apache.hadoop.fs.Path(url)
    return path, path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())


def expand(spark, urls: list[str], fmt: str = "auto"):
    """Every file under the URLs (files, directories walked, globs), as inputs.InputFile, in a
    stable order; hidden, `_`-prefixed and empty files skipped as the local expansion does."""
    from pulsar_txn_cli.pipeline import inputs

    out = []
    for url in urls:
        path, fs = _fs(spark, url)
        if inputs._GLOB_CHARS & set(url):
            statuses = fs.globStatus(path) or []
            if not statuses:
                raise UsageError(f"no file matches {url}")
        elif fs.exists(path):
            statuses = [fs.getFileStatus(path)]
        else:
            raise UsageError(f"cannot read {url}: no such file or directory")
        found = sorted(_files(fs, statuses), key=lambda item: _walk_order(url, item[0]))
        kept = [(name, size) for name, size in found if size > 0]
        if not found:
            raise UsageError(f"the directory {url} holds no dump files")
        if not kept:
            raise EmptyInput(url, "it is empty" if len(found) == 1 else f"its {len(found)} files are empty")
        for name, _ in kept:
            chosen = fmt if fmt != "auto" else _detect(spark, name)
            out.append(inputs.InputFile(name, name, chosen))
    return out


def _walk_order(root: str, name: str):
    """The local expansion's order (os.walk, sorted): a folder's files, then its folders."""
    parts = name[len(root) :].strip("/").split("/") if name.startswith(root) else name.split("/")
    return [(1, part) for part in parts[:-1]] + [(0, parts[-1])]


def _files(fs, statuses):
    for status in statuses:
        if not status.isDirectory():
            yield status.getPath().toString(), status.getLen()
            continue
        root = status.getPath().toString().rstrip("/") + "/"
        listing = fs.listFiles(status.getPath(), True)
        while listing.hasNext():
            child = listing.next()
            name = child.getPath().toString()
            if not any(part.startswith((".", "_")) for part in name[len(root) :].split("/")):
                yield name, child.getLen()


def _detect(spark, url: str) -> str:
    from pulsar_txn_cli.pipeline import inputs

    if url.lower().endswith((".parquet", ".pq")):
        return "parquet"
    path, fs = _fs(spark, url)
    stream = fs.open(path)
    try:
        head = bytes(stream.readNBytes(inputs.HEAD_BYTES))
    finally:
        stream.close()
    return inputs.detect_head(head, url)


def exists(spark, url: str) -> bool:
    path, fs = _fs(spark, url)
    return bool(fs.exists(path))


def read_bytes(spark, url: str) -> bytes | None:
    """The whole (small) file at a URL; None when there is none."""
    path, fs = _fs(spark, url)
    if not fs.exists(path):
        return None
    stream = fs.open(path)
    try:
        return bytes(stream.readAllBytes())
    finally:
        stream.close()


def list_files(spark, url: str) -> list[str]:
    """The URLs of every file under a directory URL (recursively); none when it does not exist."""
    path, fs = _fs(spark, url)
    if not fs.exists(path):
        return []
    return sorted(name for name, _ in _files(fs, [fs.getFileStatus(path)]))


def upload(spark, local_file: str, url: str) -> None:
    """Move a local file to a Hadoop URL (replacing what is there)."""
    jvm = spark.sparkContext._jvm
    path, fs = _fs(spark, url)
    fs.copyFromLocalFile(True, True, jvm.org.apache.hadoop.fs.Path(local_file), path)
