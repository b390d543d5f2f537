"""What a Spark cluster's executors need of pulsar-txn, shipped at run time.

The executors of a cluster need only PySpark, pyarrow and pandas: the driver ships
- a zip of the pulsar_txn_cli package and of protobuf's pure-Python runtime (SparkContext.addPyFile;
  a zip cannot hold extension modules, so protobuf falls back to its pure-Python implementation);
- the native scanner's shared library, if it is built (SparkContext.addFile); an executor loads it
  only where its Python's ABI matches the file's tag, and decodes with the pure-Python path
  otherwise (the same facts: tests/pipeline/test_scan.py holds them equal).
The zip is built once per content and kept in the user's cache directory.
"""
from __future__ import annotations

import hashlib
import importlib.machinery
import os
import zipfile
from dataclasses import dataclass
from pathlib import Path

# (import name, what in it is shipped): only Python sources; compiled modules stay behind.
_PACKAGES = ("pulsar_txn_cli", "google.protobuf")
_STAMP = (1980, 1, 1, 0, 0, 0)  # fixed times: the same sources give the same zip


@dataclass(frozen=True)
class Shipment:
    zip_path: str
    zip_bytes: int
    native: str | None  # the scanner's shared library, if shipped

    def describe(self) -> str:
        native = (f"the native scanner {os.path.basename(self.native)} (used where the executors' Python matches)"
                  if self.native else "no native scanner (the executors decode with the pure-Python path)")
        return f"shipped to the executors: {os.path.basename(self.zip_path)} ({self.zip_bytes / 1e6:.1f} MB: pulsar_txn_cli and protobuf's Python runtime) and {native}"


def build(native: bool = True, cache_dir: str | None = None) -> Shipment:
    """The zip (built if this content was never built) and the scanner's library."""
    sources = sorted(_sources())
    digest = hashlib.sha256()
    for arcname, path in sources:
        digest.update(arcname.encode() + b"\0" + Path(path).read_bytes())
    from pulsar_txn_cli import __version__

    folder = Path(cache_dir or _cache_dir())
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"pulsar_txn_cli-{__version__}-{digest.hexdigest()[:12]}.zip"
    if not target.exists():
        tmp = target.with_suffix(f".tmp-{os.getpid()}")
        with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as out:
            for arcname, path in sources:
                out.writestr(zipfile.ZipInfo(arcname, _STAMP), Path(path).read_bytes())
        os.replace(tmp, target)
    return Shipment(str(target), target.stat().st_size, native_library() if native else None)


def ship(spark_context, shipment: Shipment) -> None:
    spark_context.addPyFile(shipment.zip_path)
    if shipment.native:
        spark_context.addFile(shipment.native)


def native_library() -> str | None:
    """The built scanner's file, if the driver uses it."""
    from pulsar_txn_cli.pipeline import facts

    return getattr(facts.NATIVE, "__file__", None)


def _sources():
    import importlib

    for name in _PACKAGES:
        package = importlib.import_module(name)
        root = Path(package.__file__).parent
        base = root.parents[len(name.split(".")) - 1]
        for folder, dirs, files in os.walk(root):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            for file in sorted(files):
                if file.endswith(".py"):
                    path = os.path.join(folder, file)
                    yield os.path.relpath(path, base).replace(os.sep, "/"), path


def _cache_dir() -> str:
    import platformdirs

    return os.path.join(platformdirs.user_cache_dir("pulsar-txn"), "spark-ship")


# ---------------------------------------------------------------- on the executors


def load_native(name: str | None) -> str:
    """Use the shipped scanner `name` (a SparkFiles name) if this Python can; says which decoder
    this executor uses. Runs on the executors, once per task (cheap after the first)."""
    from pulsar_txn_cli.pipeline import facts

    if facts.NATIVE is not None:
        return "native scanner"
    if not name:
        return "pure-Python (no native scanner shipped)"
    suffix = name[name.index("."):] if "." in name else ""
    if suffix not in importlib.machinery.EXTENSION_SUFFIXES:
        return f"pure-Python (the scanner {name} does not fit this Python: {importlib.machinery.EXTENSION_SUFFIXES[0]})"
    from pyspark import SparkFiles
    import importlib.util

    try:
        loader = importlib.machinery.ExtensionFileLoader("pulsar_txn_cli.pipeline._scan", SparkFiles.get(name))
        spec = importlib.util.spec_from_loader(loader.name, loader)
        module = importlib.util.module_from_spec(spec)
        loader.exec_module(module)
    except (ImportError, OSError) as exc:
        return f"pure-Python (the scanner did not load: {exc})"
    if not facts.use_native(module):
        return "pure-Python (this Python's hashes differ from the scanner's)"
    return "native scanner"
