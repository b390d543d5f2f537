"""Where entries come from: input expansion, format detection, readers and Parquet output.

Inputs are files, directories (walked recursively, hidden and `_`-prefixed files skipped, as
Spark writes `_SUCCESS` and `.crc` files) and globs. Each file is one of:
- jsonl:      the project's dump format (codec.dumps), one entry a line;
- parquet:    columns managedLedger (string), ledgerId, entryId (integers), data (binary);
- readledger: `bookkeeper shell readledger -m -ef hex` text, for one managed ledger (--managed-ledger).
A reader yields raw tuples (managedLedger, ledgerId, entryId, data, where, error) in file order.
"""

from __future__ import annotations

import glob
import os
import threading
from dataclasses import dataclass
from pathlib import Path

from pulsar_txn_cli.errors import DataError, EmptyInput, UsageError

FORMATS = ("auto", "jsonl", "parquet", "readledger")
PARQUET_COLUMNS = ("managedLedger", "ledgerId", "entryId", "data")
_PARQUET_SUFFIXES = (".parquet", ".pq")
_GLOB_CHARS = set("*?[")
HEAD_BYTES = 65536


@dataclass(frozen=True)
class InputFile:
    label: str  # as shown in positions and messages
    path: str
    fmt: str


def expand(inputs: list[str], fmt: str = "auto", *, format_option: str | None = "--format") -> list[InputFile]:
    """Every input file, in a stable order, with its format.

    An input that holds no entries is an error (EmptyInput, exit 3), checked before any work: a
    file named on the command line that is empty, or a directory or glob whose files are all
    empty. Empty files inside a directory or glob are skipped (Spark writes empty part files).
    format_option names the option that chooses a format, for a file whose format cannot be told
    (None where the command has none)."""
    if fmt not in FORMATS:
        raise UsageError(f"--format must be one of {', '.join(FORMATS)}, not {fmt!r}")
    if not inputs:
        raise UsageError("nothing to analyze: give dump files, directories or globs")
    files: list[str] = []
    for name in inputs:
        if _GLOB_CHARS & set(name):
            matches = sorted(glob.glob(name, recursive=True))
            if not matches:
                raise UsageError(f"no file matches {name}")
            files.extend(_not_empty([f for match in matches for f in _walk(match)], name, fmt))
        elif os.path.isdir(name):
            found = _walk(name)
            if not found:
                raise UsageError(f"the directory {name} holds no dump files")
            files.extend(_not_empty(found, name, fmt))
        elif os.path.isfile(name):
            files.extend(_not_empty([name], name, fmt))
        else:
            raise UsageError(f"cannot read {name}: no such file or directory")
    seen: set[str] = set()
    out = []
    for path in files:
        key = os.path.realpath(path)
        if key in seen:
            continue
        seen.add(key)
        out.append(InputFile(path, path, fmt if fmt != "auto" else detect(path, format_option)))
    return out


def require_entries(report: dict) -> None:
    """After the work: inputs that held no entry at all (text without any) are EmptyInput too."""
    if report["totals"]["entries"] == 0:
        raise EmptyInput("the input")


def _not_empty(paths: list[str], label: str, fmt: str) -> list[str]:
    """The paths that hold something; EmptyInput naming `label` when none does."""
    from pulsar_txn_cli.codec.dumps import check_not_empty

    kept = []
    for path in paths:
        try:
            check_not_empty(path, path, "parquet" if path.lower().endswith(_PARQUET_SUFFIXES) else fmt)
        except EmptyInput:
            continue
        kept.append(path)
    if not kept:
        raise EmptyInput(label, "it is empty" if len(paths) == 1 else f"its {len(paths)} files are empty")
    return kept


def _walk(root: str) -> list[str]:
    if not os.path.isdir(root):
        return [root]
    found = []
    for folder, dirs, names in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith((".", "_")))
        found.extend(os.path.join(folder, n) for n in sorted(names) if not n.startswith((".", "_")))
    return found


def detect(path: str, format_option: str | None = "--format") -> str:
    if path.lower().endswith(_PARQUET_SUFFIXES):
        return "parquet"
    try:
        with open(path, "rb") as f:
            head = f.read(HEAD_BYTES)
    except OSError as exc:
        raise DataError(f"cannot read {path}: {exc.strerror}") from None
    return detect_head(head, path, format_option)


def detect_head(head: bytes, path: str, format_option: str | None = "--format") -> str:
    """The format of a file from its first HEAD_BYTES bytes (a Parquet name is told by detect)."""
    if head.startswith(b"PAR1"):
        return "parquet"
    if b"Lid=" in head and b"Eid=" in head:
        return "readledger"
    stripped = head.lstrip()
    if stripped.startswith(b"{") or not stripped:
        return "jsonl"
    advice = f"; name its format with {format_option}" if format_option else ""
    raise DataError(f"{path} is neither a JSONL dump, Parquet nor readledger hex text{advice}")


def check_inputs(
    files: list[InputFile], managed_ledger: str | None, forced_log: str | None, force_log: bool = False
) -> None:
    """Fail before any work on what cannot be analyzed (Parquet without the columns, a
    readledger text without a managed-ledger name, a --log that the input's name contradicts)."""
    for f in files:
        if f.fmt == "readledger" and not managed_ledger and not forced_log:
            raise UsageError(f"{f.label} is readledger text, which names no managed ledger; pass --managed-ledger NAME")
        if f.fmt == "parquet":
            _check_parquet(f)
        if forced_log and not force_log:
            _check_log(f, managed_ledger, forced_log)


def _check_log(f: InputFile, managed_ledger: str | None, forced_log: str) -> None:
    """A --log that the managed-ledger name of the file's first entry contradicts is a usage error: decoding
    one log's bytes as the other gives nonsense records, not errors."""
    from pulsar_txn_cli.codec import log_of_managed_ledger
    from pulsar_txn_cli.codec.decoding import contradiction

    entries = read(f, managed_ledger)
    name = next(entries, (None,))[0]  # fails fast; `contradicted` checks them all after
    entries.close()
    if log_of_managed_ledger(name) not in (None, forced_log):
        raise UsageError(contradiction(forced_log, name, f.label))


def contradicted(report: dict, forced_log: str | None, force_log: bool) -> None:
    """After the work: any managed ledger of the report whose name contradicts --log (a dump of
    both logs whose first entry agreed) is a usage error too."""
    from pulsar_txn_cli.codec import log_of_managed_ledger
    from pulsar_txn_cli.codec.decoding import contradiction

    if not forced_log or force_log:
        return
    for ml in report["managedLedgers"]:
        if log_of_managed_ledger(ml["name"]) not in (None, forced_log):
            raise UsageError(contradiction(forced_log, ml["name"], "the input"))


def _check_parquet(f: InputFile) -> None:
    pq = pyarrow_parquet()
    try:
        schema = pq.read_schema(f.path)
    except Exception as exc:  # pyarrow raises ArrowInvalid, OSError... on a damaged file
        raise DataError(f"{f.label} is not a readable Parquet file ({exc})") from None
    missing = [c for c in PARQUET_COLUMNS if c not in schema.names]
    if missing:
        raise DataError(
            f"{f.label} lacks the Parquet column(s) {', '.join(missing)} (needs {', '.join(PARQUET_COLUMNS)})"
        )
    if pq.ParquetFile(f.path).metadata.num_rows == 0:
        raise EmptyInput(f.label, "the Parquet file has no rows")


def pyarrow_parquet(needs: str = "Parquet input and --dump-parquet need"):
    """pyarrow.parquet, or one sentence saying what `needs` it and how to install it."""
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise UsageError(f"{needs} pyarrow, which is not installed: pip install 'pulsar-txn[spark]'") from None
    return pq


def read(f: InputFile, managed_ledger: str | None = None, advance=None, batch_rows: int = 4096):
    """Raw tuples of one file; `advance(n)` is told about every n bytes consumed (progress)."""
    if f.fmt == "parquet":
        yield from _read_parquet(f, managed_ledger, advance, batch_rows)
    else:
        yield from _read_text(f, managed_ledger, advance)


def _read_text(f: InputFile, managed_ledger, advance):
    with open(f.path, "rb") as stream:
        yield from _text_entries(f, stream, managed_ledger, advance, os.path.getsize(f.path))


def read_content(f: InputFile, content: bytes, managed_ledger=None):
    """Raw tuples of a text file given whole (a Hadoop file read by Spark's binaryFile)."""
    import io

    return _text_entries(f, io.BytesIO(content), managed_ledger, None, len(content))


def _text_entries(f: InputFile, stream, managed_ledger, advance, size: int):
    from pulsar_txn_cli.codec import dumps

    done = 0
    for n, raw in enumerate(dumps.read_entries(stream, f.fmt, source=f.label)):
        error = str(raw.error) if raw.error is not None else None
        yield (raw.managed_ledger or managed_ledger, raw.ledger_id, raw.entry_id, raw.data, raw.where, error)
        if advance is not None and n % 1024 == 1023:
            now = stream.tell()
            advance(now - done)
            done = now
    if advance is not None:
        advance(size - done)


def _read_parquet(f: InputFile, managed_ledger, advance, batch_rows, row_groups=None, first_row=0):
    pq = pyarrow_parquet()
    parquet = pq.ParquetFile(f.path)
    size = os.path.getsize(f.path)
    rows = max(parquet.metadata.num_rows, 1)
    row = first_row
    for batch in parquet.iter_batches(batch_size=batch_rows, row_groups=row_groups, columns=list(PARQUET_COLUMNS)):
        yield from parquet_rows(
            batch.column(0).to_pylist(),
            batch.column(1).to_pylist(),
            batch.column(2).to_pylist(),
            batch.column(3).to_pylist(),
            f.label,
            row,
            managed_ledger,
        )
        row += batch.num_rows
        if advance is not None:
            advance(size * batch.num_rows // rows)


def work_units(f: InputFile) -> list[tuple[int, int]]:
    """How a file is split across Spark tasks: (row group, its first row) for Parquet, one
    (-1, 0) unit for a text file (read whole)."""
    if f.fmt != "parquet":
        return [(-1, 0)]
    metadata = pyarrow_parquet().ParquetFile(f.path).metadata
    units, first = [], 0
    for group in range(metadata.num_row_groups):
        units.append((group, first))
        first += metadata.row_group(group).num_rows
    return units


def read_unit(f: InputFile, group: int, first_row: int, managed_ledger=None):
    """Raw tuples of one work unit (see work_units)."""
    if group < 0:
        return read(f, managed_ledger)
    return _read_parquet(f, managed_ledger, None, 4096, [group], first_row)


def parquet_rows(mls, ledgers, entries, datas, label, first_row, managed_ledger=None):
    """Raw tuples of Parquet rows."""
    for i, (ml, lid, eid, data) in enumerate(zip(mls, ledgers, entries, datas)):
        yield parquet_raw(ml, lid, eid, data, label, first_row + i, managed_ledger)


def parquet_raw(ml, lid, eid, data, label, row_index, managed_ledger=None):
    """The raw tuple of one Parquet row (row_index 0-based; also used by the Spark executors)."""
    error = None if data is not None else "the Parquet row has no data"
    return (ml or managed_ledger, lid, eid, data, f"{label} #{row_index + 1}", error)


def write_parquet(raw_tuples, out: str, row_group_rows: int = 4096) -> int:
    """Write raw tuples to one Parquet file; returns the number of rows. Row groups are kept
    small so Spark can split the file across tasks."""
    pq = pyarrow_parquet()
    import pyarrow as pa

    schema = pa.schema(
        [("managedLedger", pa.string()), ("ledgerId", pa.int64()), ("entryId", pa.int64()), ("data", pa.binary())]
    )
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    # hidden (input expansion skips it) and unique per thread: collect writes several at once
    tmp = os.path.join(os.path.dirname(out), f".{os.path.basename(out)}.{os.getpid()}-{threading.get_ident()}.tmp")
    count = 0
    columns: list[list] = [[], [], [], []]
    try:
        with pq.ParquetWriter(tmp, schema, compression="zstd") as writer:
            for ml, lid, eid, data, _where, _error in raw_tuples:
                for column, value in zip(columns, (ml, lid, eid, data)):
                    column.append(value)
                count += 1
                if len(columns[0]) >= row_group_rows:
                    writer.write_table(pa.table(columns, schema=schema), row_group_size=row_group_rows)
                    columns = [[], [], [], []]
            if columns[0]:
                writer.write_table(pa.table(columns, schema=schema), row_group_size=row_group_rows)
        with open(tmp, "rb") as written:
            os.fsync(written.fileno())  # durable before it is renamed (and, in collect, recorded)
        os.replace(tmp, out)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return count
