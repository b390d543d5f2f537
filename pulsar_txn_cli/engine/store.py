"""The engine's one SQLite database: schema, WAL mode, the process lock and commit hooks.

One database per engine directory. A process lock (flock on `engine.lock`) keeps a second
process out: it waits briefly (saying so through notices), then fails with EngineBusy; `engine
serve` adds its URL to the lock file, so a command that finds it locked can point to the server.
Work happens inside `tx()`; the outermost `tx()` commits once, then runs the after-commit
callbacks, so a writer's callback can never announce an add that a crash could still lose. The
entries rows of a transaction are queued (add_rows) and inserted together just before its commit.
"""

from __future__ import annotations

import fcntl
import os
import sqlite3
import time
from pathlib import Path

from pulsar_txn_cli import notices
from pulsar_txn_cli.errors import EngineBusy, EngineError

DB_NAME = "engine.db"
LOCK_NAME = "engine.lock"
SCHEMA_VERSION = "1"

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS config (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS dynamic_config (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS managed_ledgers (name TEXT PRIMARY KEY, state TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS ledgers (
  ledger_id INTEGER PRIMARY KEY, ml TEXT NOT NULL, created_ms INTEGER NOT NULL,
  entries INTEGER NOT NULL DEFAULT 0, size INTEGER NOT NULL DEFAULT 0, closed INTEGER NOT NULL DEFAULT 0);
CREATE INDEX IF NOT EXISTS ledgers_by_ml ON ledgers (ml, ledger_id);
-- A rowid table: WITHOUT ROWID (engines made before 2026-11-26 keep it) puts all but ~1 KB of a
-- batched entry on an overflow page of its own, so batched logs wrote 1.7x the WAL (bench engine).
CREATE TABLE IF NOT EXISTS entries (
  ledger_id INTEGER NOT NULL, entry_id INTEGER NOT NULL, data BLOB NOT NULL,
  PRIMARY KEY (ledger_id, entry_id));
CREATE TABLE IF NOT EXISTS cursors (ml TEXT NOT NULL, name TEXT NOT NULL, state TEXT NOT NULL, PRIMARY KEY (ml, name));
CREATE TABLE IF NOT EXISTS topics (name TEXT PRIMARY KEY, partitions INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS subscriptions (topic TEXT NOT NULL, name TEXT NOT NULL, state TEXT NOT NULL,
  PRIMARY KEY (topic, name));
"""


LOCK_TIMEOUT_ENV = "PULSAR_TXN_ENGINE_LOCK_TIMEOUT"


def lock_timeout() -> float:
    try:
        return float(os.environ.get(LOCK_TIMEOUT_ENV, "5"))
    except ValueError:
        return 5.0


class Store:
    """The SQLite database of one engine directory, held by this process until close()."""

    def __init__(self, directory: Path, *, create: bool, wait: float | None = None):
        self.directory = Path(directory)
        if not (self.directory / DB_NAME).exists() and not create:
            raise EngineError(f"no engine in {self.directory}; run `pulsar-txn engine init` first")
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            self._lock = _acquire_lock(self.directory / LOCK_NAME, lock_timeout() if wait is None else wait)
        except OSError as exc:
            raise EngineError(f"cannot use {self.directory} as the engine directory: {exc.strerror or exc}") from None
        try:
            self.db = sqlite3.connect(self.directory / DB_NAME, isolation_level="DEFERRED", check_same_thread=False)
            # WAL + NORMAL: a commit survives SIGKILL of this process (the WAL is in the OS cache);
            # only a power loss can lose the last commits.
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=NORMAL")
            self.db.execute("PRAGMA busy_timeout=5000")
            self.db.executescript(SCHEMA)
            self.db.commit()
        except sqlite3.DatabaseError as exc:
            self._release()
            raise EngineError(f"the engine database {self.directory / DB_NAME} cannot be opened: {exc}") from None
        self._depth = 0
        self._rows: list[tuple] = []  # entries rows to insert, in one executemany at the next commit
        self._before: dict[int, object] = {}  # objects to save (id -> obj with .save())
        self._after: list = []
        self._on_rollback: list = []
        self.fail_commits = False  # fault injection for tests: a disk that refuses writes
        self._force = False
        self._scope = _Scope(self)
        # name -> the one ManagedLedger object of that name (engine/ledger.py's ManagedLedger.get)
        self.managed_ledgers: dict[str, object] = {}

    # ---------------------------------------------------------------- transactions

    def tx(self) -> "_Scope":
        """Nested scopes commit once at the outermost level, then run after-commit callbacks."""
        # No explicit BEGIN: sqlite3 opens a transaction at the first write, so a scope that
        # wrote nothing costs no commit.
        return self._scope

    def _commit(self) -> None:
        try:
            if self._rows:
                self.flush_rows()
            # Dirty objects ride along with the next real write (or save_all()): state that a
            # crash could lose here is rebuilt by replay.
            while self._before and (self.db.in_transaction or self._force):
                pending, self._before = self._before, {}
                for obj in pending.values():
                    obj.save()
            if self.fail_commits:
                raise sqlite3.OperationalError("disk I/O error (injected)")
            if self.db.in_transaction:
                self.db.commit()
        except sqlite3.Error as exc:
            self._rollback()
            raise EngineError(f"the engine database {self.directory / DB_NAME} refused a commit: {exc}") from None
        after, self._after, self._on_rollback = self._after, [], []
        if after:
            # What the callbacks write shares one further commit (their own callbacks follow it).
            with self.tx():
                for fn in after:
                    fn()

    def _rollback(self) -> None:
        self._rows = []
        try:
            self.db.rollback()
        except sqlite3.Error:
            pass
        self._before = {}
        self._after = []
        failed, self._on_rollback = self._on_rollback, []
        for fn in failed:
            fn()

    def save_all(self) -> None:
        """Save every dirty object and commit now."""
        self._force = True
        try:
            with self.tx():
                pass
        finally:
            self._force = False

    def add_rows(self, rows: list[tuple]) -> None:
        """(ledger_id, entry_id, data) rows for the entries table, inserted together before the commit.

        One executemany per commit instead of one statement per entry; whoever reads or deletes
        entries inside the same transaction calls flush_rows() first.
        """
        self._rows += rows

    def flush_rows(self) -> None:
        if self._rows:
            rows, self._rows = self._rows, []
            self.db.executemany("INSERT INTO entries(ledger_id, entry_id, data) VALUES(?, ?, ?)", rows)

    def dirty(self, obj) -> None:
        """obj.save() runs once just before the next commit."""
        self._before[id(obj)] = obj

    def after_commit(self, fn, on_rollback=None) -> None:
        self._after.append(fn)
        if on_rollback is not None:
            self._on_rollback.append(on_rollback)

    @property
    def in_tx(self) -> bool:
        return self._depth > 0

    # ---------------------------------------------------------------- small helpers

    def meta(self, key: str, default: str | None = None) -> str | None:
        row = self.db.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return row[0] if row else default

    def set_meta(self, key: str, value: str) -> None:
        self.db.execute(
            "INSERT INTO meta(key, value) VALUES(?, ?) ON CONFLICT(key) DO UPDATE SET value=excluded.value",
            (key, value),
        )

    def announce_url(self, url: str) -> None:
        """Say in the lock file that this process serves the engine at url (engine serve)."""
        if self._lock is not None:
            data = f"{os.getpid()} {url}".encode()
            os.ftruncate(self._lock, 0)
            os.pwrite(self._lock, data, 0)

    def close(self) -> None:
        if getattr(self, "db", None) is not None:
            try:
                if self._depth:
                    self._rollback()
                self.db.close()
            finally:
                self.db = None
                self._release()

    def reset(self) -> None:
        """Delete the engine's database (with its WAL files) while this store holds the lock, then close."""
        try:
            for suffix in ("", "-wal", "-shm"):
                path = self.directory / (DB_NAME + suffix)
                if path.exists():
                    path.unlink()
        finally:
            self.close()

    def _release(self) -> None:
        if self._lock is not None:
            try:
                fcntl.flock(self._lock, fcntl.LOCK_UN)
            finally:
                os.close(self._lock)
                self._lock = None


def _acquire_lock(path: Path, wait: float) -> int:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    deadline = time.monotonic() + max(wait, 0.0)
    announced = False
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            if time.monotonic() >= deadline:
                holder = _holder(fd)
                os.close(fd)
                raise EngineBusy(
                    f"the engine directory {path.parent} is in use by another process ({holder.describe()}); "
                    f"gave up waiting for its lock after {wait:g} s",
                    hint=holder.advice(),
                ) from None
            if not announced:
                announced = True
                notices.notify(
                    f"waiting for the engine lock on {path.parent}, held by {_holder(fd).describe()}; "
                    f"giving up after {wait:g} s ({LOCK_TIMEOUT_ENV})"
                )
            time.sleep(0.05)
    os.ftruncate(fd, 0)
    os.pwrite(fd, str(os.getpid()).encode(), 0)
    return fd


class _Holder:
    """Who holds the lock, from the lock file: its pid, and the URL when it is `engine serve`."""

    def __init__(self, text: str):
        pid, _, self.url = text.strip().partition(" ")
        self.pid = pid if pid.isdigit() else ""
        self.command = _command_of(self.pid) if self.pid else ""

    def describe(self) -> str:
        if not self.pid:
            return "another process"
        what = f"pid {self.pid}"
        if self.command:
            what += f", `{self.command}`"
        return what + (f", serving {self.url}" if self.url else "")

    def advice(self) -> str:
        if self.url:
            return (
                f"the engine is served at {self.url}: give --admin-url {self.url} instead of --engine-dir "
                f"(`pulsar-txn engine simulate --admin-url {self.url}` adds a workload to it)"
            )
        return (
            f"wait for the other command to finish, give it more time ({LOCK_TIMEOUT_ENV}=SECONDS), "
            "or use another --engine-dir"
        )


def _holder(fd: int) -> _Holder:
    try:
        return _Holder(os.pread(fd, 512, 0).decode("utf-8", "replace"))
    except OSError:
        return _Holder("")


def _command_of(pid: str) -> str:
    """The holder's command line, from `pulsar-txn` on when it is one (Linux's /proc; else empty)."""
    try:
        words = Path(f"/proc/{pid}/cmdline").read_bytes().decode("utf-8", "replace").split("\0")
    except OSError:
        return ""
    words = [w for w in words if w]
    for i, word in enumerate(words):
        if Path(word).name in ("pulsar-txn", "pulsarctl-txn"):
            words = ["pulsar-txn", *words[i + 1 :]]
            break
    text = " ".join(" ".join(words).split())  # one line, whatever the arguments hold
    return text if len(text) <= 80 else text[:77] + "..."


class _Scope:
    """Store.tx()'s context manager: a plain class, as it runs for every add on the hot path."""

    __slots__ = ("store",)

    def __init__(self, store: Store):
        self.store = store

    def __enter__(self) -> Store:
        self.store._depth += 1
        return self.store

    def __exit__(self, exc_type, exc, tb) -> bool:
        store = self.store
        store._depth -= 1
        if store._depth == 0:
            if exc_type is None:
                # Most scopes (a timer instant whose adds were only buffered) have nothing to commit.
                if store._rows or store._after or store.db.in_transaction or store._force or store.fail_commits:
                    store._commit()
            else:
                store._rollback()
        return False
