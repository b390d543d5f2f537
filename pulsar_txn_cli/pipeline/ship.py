"""What a Spark cluster's executors need of pulsar-txn, shipped at run time.

The executors of a cluster need only PySpark, pyarrow and pandas: the driver ships
- a zip of the pulsar_txn_cli package and of protobuf's pure-Python runtime (SparkContext.addPyFile;
  a zip cannot hold compiled modules, so protobuf falls back to its pure-Python implementation);
- the compiled modules the decoding uses, as built for the driver's Python (SparkContext.addFile):
  the native scanner (if built) and orjson (JSONL dumps). An executor loads each only where its
  Python's ABI matches the file's tag; elsewhere it decodes with the pure-Python path (the same
  facts: tests/pipeline/test_scan.py holds them equal) and reads JSONL with the standard json module
  (the same entries; only the wording of a malformed line's message may differ).
The zip is built once per content and kept in the user's cache directory.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import os
import zipfile
from dataclasses import dataclass
from pathlib import Path

# Packages shipped in the zip: only their Python sources; compiled modules go as files of their own.
_PACKAGES = ("pulsar_txn_cli", "google.protobuf")
SCANNER = "pulsar_txn_cli.pipeline._scan"
_STAMP = (1980, 1, 1, 0, 0, 0)  # fixed times: the same sources give the same zip


@dataclass(frozen=True)
class Shipment:
    zip_path: str
    zip_bytes: int
    compiled: tuple[tuple[str, str], ...]  # (module name, file) of the compiled modules shipped

    def describe(self) -> str:
        names = ", ".join(os.path.basename(path) for _, path in self.compiled)
        what = f"and the compiled modules {names} (used where the executors' Python matches)" if self.compiled else ""
        if not any(module == SCANNER for module, _ in self.compiled):
            what += "; no native scanner: the executors decode with the pure-Python path"
        return (
            f"shipped to the executors: {os.path.basename(self.zip_path)} ({self.zip_bytes / 1e6:.1f} MB: "
            f"pulsar_txn_cli and protobuf's Python runtime) {what}"
        )

    def names(self) -> tuple[tuple[str, str], ...]:
        """(module name, SparkFiles name) of the compiled modules, for the executors."""
        return tuple((module, os.path.basename(path)) for module, path in self.compiled)


def build(native: bool = True, cache_dir: str | None = None) -> Shipment:
    """The zip (built if this content was never built) and the compiled modules to ship
    (without the scanner when native=False: the executors then decode with the pure-Python path)."""
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
        folders = sorted(
            {arcname.rsplit("/", i)[0] + "/" for arcname, _ in sources for i in range(1, arcname.count("/") + 1)}
        )
        with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as out:
            for name in folders:  # zipimport finds namespace packages (google) only by their entries
                out.writestr(zipfile.ZipInfo(name, _STAMP), b"")
            for arcname, path in sources:
                out.writestr(zipfile.ZipInfo(arcname, _STAMP), Path(path).read_bytes())
        os.replace(tmp, target)
    compiled = tuple((module, path) for module, path in compiled_modules() if native or module != SCANNER)
    return Shipment(str(target), target.stat().st_size, compiled)


def ship(spark_context, shipment: Shipment) -> None:
    spark_context.addPyFile(shipment.zip_path)
    for _, path in shipment.compiled:
        spark_context.addFile(path)


def compiled_modules() -> tuple[tuple[str, str], ...]:
    """(module name, file) of the compiled modules the driver decodes with."""
    import orjson

    from pulsar_txn_cli.pipeline import facts

    found = [(SCANNER, getattr(facts.NATIVE, "__file__", None)), ("orjson", getattr(orjson, "orjson", orjson).__file__)]
    return tuple(
        (module, path)
        for module, path in found
        if path and path.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES))
    )


def _sources():
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


def load_compiled(shipped) -> str:
    """Load the shipped compiled modules ((module name, SparkFiles name) pairs) that this Python
    can use, unless it has its own; says which decoder this executor uses. Runs on the executors,
    once per task (cheap after the first)."""
    import sys

    from pulsar_txn_cli.pipeline import facts

    for module, name in shipped:
        if module == SCANNER and facts.NATIVE is None:
            loaded = _load(module, name)
            if loaded is not None:
                facts.use_native(loaded)
        elif module not in sys.modules and importlib.util.find_spec(module) is None:
            loaded = _load(module, name)
            if loaded is not None:
                sys.modules[module] = loaded
    if facts.NATIVE is not None:
        return "native scanner"
    if not any(module == SCANNER for module, _ in shipped):
        return "pure-Python (no native scanner shipped)"
    return (
        f"pure-Python (the shipped scanner does not load in this Python, {importlib.machinery.EXTENSION_SUFFIXES[0]})"
    )


def _load(module: str, name: str):
    """The compiled module in the shipped file `name`, or None where it does not fit this Python."""
    if name[len(module.rsplit(".", 1)[-1]) :] not in importlib.machinery.EXTENSION_SUFFIXES:
        return None  # built for another Python: its tag (e.g. .cpython-311-x86_64-linux-gnu.so) is not this one's
    from pyspark import SparkFiles

    try:
        loader = importlib.machinery.ExtensionFileLoader(module, SparkFiles.get(name))
        loaded = importlib.util.module_from_spec(importlib.util.spec_from_loader(module, loader))
        loader.exec_module(loaded)
    except (ImportError, OSError):
        return None
    return loaded
