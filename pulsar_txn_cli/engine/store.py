"""The engine's one SQLite database: schema, WAL mode, the process lock and commit hooks.

One database per engine directory. A process lock (flock on `engine.lock`) keeps a second
process out: it waits briefly, then fails with EngineBusy. Work happens inside `tx()`; the
outermost `tx()` commits once, then runs the after-commit callbacks, so a writer's callback
can never announce an add that a crash could still lose.
"""
from __future__ import annotations

import fcntl
import os
import sqlite3
import time
from pathlib import Path

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
CREATE TABLE IF NOT EXISTS entries (
  ledger_id INTEGER NOT NULL, entry_id INTEGER NOT NULL, data BLOB NOT NULL,
  PRIMARY KEY (ledger_id, entry_id)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS cursors (ml TEXT NOT NULL, name TEXT NOT NULL, state TEXT NOT NULL, PRIMARY KEY (ml, name));
CREATE TABLE IF NOT EXISTS topics (name TEXT PRIMARY KEY, partitions INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS subscriptions (topic TEXT NOT NULL, name TEXT NOT NULL, state TEXT NOT NULL,
  PRIMARY KEY (topic, name));
"""


def lock_timeout() -> float:
    try:
        return float(os.environ.get("PULSAR_TXN_ENGINE_LOCK_TIMEOUT", "5"))
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
        self.db.execute("INSERT INTO meta(key, value) VALUES(?, ?) ON CONFLICT(key) DO UPDATE SET value=excluded.value", (key, value))

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
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            if time.monotonic() >= deadline:
                holder = _read_pid(fd)
                os.close(fd)
                who = f" (pid {holder})" if holder else ""
                raise EngineBusy(
                    f"the engine directory {path.parent} is in use by another process{who}; "
                    f"waited {wait:g} s",
                    hint="wait for the other command (or `engine serve`) to finish, or use another --engine-dir",
                ) from None
            time.sleep(0.05)
    os.ftruncate(fd, 0)
    os.pwrite(fd, str(os.getpid()).encode(), 0)
    return fd


def _read_pid(fd: int) -> str:
    try:
        return os.pread(fd, 32, 0).decode().strip()
    except OSError:
        return ""


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
                store._commit()
            else:
                store._rollback()
        return False
