"""Managed ledgers on SQLite: ledgers, entries, cursors, rollover and trimming.

Generic on purpose (any name, entries are bytes): the TC logs, the pending-ack stores and the
transaction buffer (engine/buffer/ledgers.py) use it. Behaviour follows ManagedLedgerImpl where it matters
to transaction logs: global increasing ledger ids, a new ledger on every (re)open (an empty
previous ledger is dropped), rollover by entries / size / age, ledgers wholly behind the
slowest cursor trimmed (retention 0), batch-index deletes ignored on a cursor without
batch-index deletion (ManagedCursorImpl.asyncDelete; docs/real-broker-findings.md, the batch-index deletion stall).
"""

from __future__ import annotations

import base64

import orjson

from pulsar_txn_cli.errors import EngineError
from pulsar_txn_cli.names import Position
from pulsar_txn_cli.protocol import TC_CURSOR, timestamp_text

MB = 1024 * 1024


class AddFailed(EngineError):
    """A ledger add failed (a bookie error in Pulsar)."""


class BatchedPosition(Position):
    """A log position; batch_size/batch_index are set for a record inside a batched entry.

    Extends names.Position as TxnBatchedPositionImpl extends PositionImpl: the tuple's equality,
    hashing and ordering see only (ledger, entry), never the batch fields.
    """

    batch_size: int | None = None  # class defaults: a plain position allocates no instance dict
    batch_index: int | None = None

    def __new__(cls, ledger: int, entry: int, batch_size: int | None = None, batch_index: int | None = None):
        self = tuple.__new__(cls, (ledger, entry))
        if batch_size is not None:
            self.batch_size = batch_size
            self.batch_index = batch_index
        return self

    def ack_set(self) -> list[int] | None:
        """setAckSetByIndex: all batch bits 1 except batch_index; None means "the whole entry"."""
        if not self.batch_size or self.batch_size <= 1:
            return None
        bits = ((1 << self.batch_size) - 1) & ~(1 << self.batch_index)
        return [(bits >> (64 * i)) & 0xFFFFFFFFFFFFFFFF for i in range((self.batch_size + 63) // 64)]

    def __repr__(self):
        extra = f", batch {self.batch_index}/{self.batch_size}" if self.batch_size is not None else ""
        return f"Position({self.ledger}:{self.entry}{extra})"

    def to_json(self) -> dict:
        out = {"ledgerId": self.ledger, "entryId": self.entry}
        if self.batch_size is not None:
            out["batchSize"] = self.batch_size
            out["batchIndex"] = self.batch_index
        return out


class Ledger:
    __slots__ = ("ledger_id", "entries", "size", "created_ms", "closed")

    def __init__(self, ledger_id, entries, size, created_ms, closed):
        self.ledger_id, self.entries, self.size, self.created_ms, self.closed = (
            ledger_id,
            entries,
            size,
            created_ms,
            closed,
        )


class ManagedLedger:
    """One managed ledger. Loading it does not change it; open_new_ledger() is a (re)open."""

    @classmethod
    def get(cls, store, clock, name: str) -> "ManagedLedger":
        """The managed ledger's one object in this store, loaded on first use.

        One object per managed ledger and store, whoever asks for it (coordinators, pending-ack
        stores, the transaction buffer, verify): two copies would overwrite each other's state.
        """
        found = store.managed_ledgers.get(name)
        if found is None:
            found = store.managed_ledgers[name] = cls(store, clock, name)
        return found

    def __init__(self, store, clock, name: str):
        """Load the managed ledger; use ManagedLedger.get(), which keeps one object per name."""
        self.store = store
        self.clock = clock
        self.name = name
        row = store.db.execute("SELECT state FROM managed_ledgers WHERE name=?", (name,)).fetchone()
        self.exists = row is not None
        state = orjson.loads(row[0]) if row else {}
        self.current: int | None = state.get("current")
        self.properties: dict[str, str] = state.get("properties", {})
        self.entries_added = state.get("entriesAdded", 0)
        self.last_ledger_created = state.get("lastLedgerCreated", 0)
        self.settings: dict = state.get("settings", {})
        self.owner: dict = state.get("owner", {})  # the store built on top keeps its open-time state here
        self.ledgers: list[Ledger] = [
            Ledger(*r)
            for r in store.db.execute(
                "SELECT ledger_id, entries, size, created_ms, closed FROM ledgers WHERE ml=? ORDER BY ledger_id",
                (name,),
            )
        ]
        self._by_id = {l.ledger_id: l for l in self.ledgers}
        self.cursors: dict[str, Cursor] = {}
        for cname, cstate in store.db.execute("SELECT name, state FROM cursors WHERE ml=?", (name,)):
            self.cursors[cname] = Cursor(self, cname, orjson.loads(cstate))
        self.fail_adds = None  # fault injection for tests: callable(data) -> bool, a failing bookie
        self._touched: set = set()  # ledgers whose entry/size counters changed since the last save

    # ---------------------------------------------------------------- lifecycle

    def open_new_ledger(self, settings: dict) -> None:
        """A (re)open: close the current ledger (dropping it when empty) and start a new one."""
        with self.store.tx():
            self.settings = dict(settings)
            self.entries_added = 0  # entriesAddedCounter counts since the managed ledger was opened
            cur = self._current()
            if cur is not None:
                self._close_ledger(cur)
            self._create_ledger()
            self.exists = True
            self._dirty()
            self.trim()  # the closed ledger may now be wholly behind the cursors

    def _current(self) -> Ledger | None:
        return self._by_id.get(self.current) if self.current is not None else None

    def _close_ledger(self, ledger: Ledger) -> None:
        ledger.closed = 1
        self._touched.discard(ledger)
        if ledger.entries == 0:
            self.ledgers.remove(ledger)
            del self._by_id[ledger.ledger_id]
            self.store.db.execute("DELETE FROM ledgers WHERE ledger_id=?", (ledger.ledger_id,))
        else:
            self.store.db.execute(
                "UPDATE ledgers SET closed=1, entries=?, size=? WHERE ledger_id=?",
                (ledger.entries, ledger.size, ledger.ledger_id),
            )
        self.current = None

    def _create_ledger(self) -> None:
        ledger_id = int(self.store.meta("next_ledger_id") or 1)
        self.store.set_meta("next_ledger_id", str(ledger_id + 1))
        now = self.clock.now_ms
        ledger = Ledger(ledger_id, 0, 0, now, 0)
        self.store.db.execute(
            "INSERT INTO ledgers(ledger_id, ml, created_ms) VALUES(?, ?, ?)", (ledger_id, self.name, now)
        )
        self.ledgers.append(ledger)
        self._by_id[ledger_id] = ledger
        self.current = ledger_id
        self.last_ledger_created = now

    def _dirty(self) -> None:
        self.store.dirty(self)

    def save(self) -> None:
        if self._touched:
            self.store.db.executemany(
                "UPDATE ledgers SET entries=?, size=? WHERE ledger_id=?",
                [(l.entries, l.size, l.ledger_id) for l in self._touched if l.ledger_id in self._by_id],
            )
            self._touched = set()
        state = {
            "current": self.current,
            "properties": self.properties,
            "entriesAdded": self.entries_added,
            "lastLedgerCreated": self.last_ledger_created,
            "settings": self.settings,
            "owner": self.owner,
        }
        self.store.db.execute(
            "INSERT INTO managed_ledgers(name, state) VALUES(?, ?) ON CONFLICT(name) DO UPDATE SET state=excluded.state",
            (self.name, orjson.dumps(state).decode()),
        )

    def set_owner_state(self, **values) -> None:
        self.owner.update(values)
        self._dirty()

    # ---------------------------------------------------------------- writing

    def add_entries(self, datas: list[bytes]) -> list[tuple[int, int]]:
        """Append entries (inside the caller's store.tx()); returns their (ledgerId, entryId)."""
        if self.fail_adds is not None and any(self.fail_adds(d) for d in datas):
            raise AddFailed(f"add to managed ledger {self.name} failed (injected bookie error)")
        if self.current is None:
            raise EngineError(f"managed ledger {self.name} is not open")
        out = []
        rows = []
        store = self.store
        ledger = self._by_id[self.current]
        for data in datas:
            ledger_id, entry_id = ledger.ledger_id, ledger.entries
            rows.append((ledger_id, entry_id, data))
            ledger.entries = entry_id + 1
            ledger.size += len(data)
            self.entries_added += 1
            out.append((ledger_id, entry_id))
            if self._full(ledger):
                store.add_rows(rows)  # queued before a trim below may delete ledgers' entries
                rows = []
                store.db.execute(
                    "UPDATE ledgers SET entries=?, size=? WHERE ledger_id=?",
                    (ledger.entries, ledger.size, ledger.ledger_id),
                )
                self._touched.discard(ledger)
                self._close_ledger(ledger)
                self._create_ledger()
                self.trim()
                ledger = self._by_id[self.current]
        if rows:
            store.add_rows(rows)  # inserted at the commit, with every other entry of it
            self._touched.add(ledger)  # its counters are written by save()
        self._dirty()
        return out

    def _rollover_ages(self) -> tuple[int, int]:
        """(min, max) age of a ledger in ms: it rolls at the max age, or when full, but never before the min."""
        s = self.settings
        return s.get("minRolloverMinutes", 10) * 60_000, s.get("maxRolloverMinutes", 240) * 60_000

    def _full(self, ledger: Ledger) -> bool:
        """ManagedLedgerImpl.currentLedgerIsFull with the settings the ledger was opened with."""
        s = self.settings
        quota = ledger.entries >= s.get("maxEntries", 50000) or ledger.size >= s.get("maxSizeMb", 2048) * MB
        min_ms, max_ms = self._rollover_ages()
        age_ms = self.clock.now_ms - ledger.created_ms
        if quota or age_ms >= max_ms:
            return age_ms > min_ms if min_ms > 0 else True
        return False

    def rollover_due_ms(self) -> int | None:
        """When roll_if_aged() first rolls the current ledger (the first instant _full() holds by age
        alone), or None while there is no current ledger or it is empty (an empty ledger never rolls)."""
        ledger = self._current()
        if ledger is None or ledger.entries == 0:
            return None
        min_ms, max_ms = self._rollover_ages()
        return ledger.created_ms + (max(max_ms, min_ms + 1) if min_ms > 0 else max_ms)

    def roll_if_aged(self) -> bool:
        """The broker's periodic check: roll a non-empty current ledger that reached the max age."""
        ledger = self._current()
        if ledger is None or ledger.entries == 0 or not self._full(ledger):
            return False
        with self.store.tx():
            self._close_ledger(ledger)
            self._create_ledger()
            self._dirty()
            self.trim()
        return True

    # ---------------------------------------------------------------- reading

    def next_position(self, pos: tuple[int, int]) -> tuple[int, int] | None:
        """The first existing entry after pos, or None."""
        lid, eid = pos
        for ledger in self.ledgers:
            if ledger.ledger_id < lid:
                continue
            start = eid + 1 if ledger.ledger_id == lid else 0
            if start < ledger.entries:
                return (ledger.ledger_id, start)
        return None

    def last_confirmed(self) -> tuple[int, int]:
        """lastConfirmedEntry: (current ledger, -1) right after a (re)open, else the last entry."""
        cur = self._current()
        if cur is not None:
            if cur.entries:
                return (cur.ledger_id, cur.entries - 1)
            return (cur.ledger_id, -1)
        for ledger in reversed(self.ledgers):
            if ledger.entries:
                return (ledger.ledger_id, ledger.entries - 1)
        return (-1, -1)

    def read_after(self, pos: tuple[int, int]):
        """(ledgerId, entryId, data) of every stored entry after pos, in order."""
        self.store.flush_rows()
        ids = [l.ledger_id for l in self.ledgers if l.ledger_id >= pos[0] and l.entries]
        for lid in ids:
            start = pos[1] + 1 if lid == pos[0] else 0
            yield from self.store.db.execute(
                "SELECT ledger_id, entry_id, data FROM entries WHERE ledger_id=? AND entry_id>=? ORDER BY entry_id",
                (lid, start),
            )

    def read_all(self):
        return self.read_after((-1, -1))

    def first_position(self) -> tuple[int, int]:
        """The position before the first entry (a new cursor's mark-delete, Earliest)."""
        return (self.ledgers[0].ledger_id, -1) if self.ledgers else (self.current or -1, -1)

    # ---------------------------------------------------------------- cursors

    def open_cursor(self, name: str, *, batch_index_deletion: bool) -> "Cursor":
        """Open (or create at Earliest) a cursor; batch-index deletion is fixed until the next open."""
        cursor = self.cursors.get(name)
        if cursor is None:
            md = self.first_position()
            cursor = Cursor(self, name, {"md": list(md)})
            self.cursors[name] = cursor
        if not batch_index_deletion and cursor.batch_deleted:
            # ManagedCursorImpl recovers deleted batch indexes only when batch-index deletion is
            # on; without it they are forgotten and those records replay again (inferred from
            # ManagedCursorImpl; docs/real-broker-findings.md, the batch-index deletion stall).
            cursor.forgotten_batch_indexes += len(cursor.batch_deleted)
            cursor.batch_deleted = {}
        cursor.batch_index_deletion = batch_index_deletion
        cursor._dirty()
        return cursor

    def trim(self) -> list[int]:
        """Delete ledgers wholly behind the slowest cursor (never the current ledger)."""
        if not self.cursors:
            return []
        slowest = min(c.mark_delete for c in self.cursors.values())
        first_live = self.next_position(slowest)
        limit = first_live[0] if first_live is not None else (self.current if self.current is not None else 1 << 62)
        gone = [l for l in self.ledgers if l.ledger_id < limit and l.ledger_id != self.current]
        if not gone:
            return []
        with self.store.tx():
            self._drop(gone)
        return [l.ledger_id for l in gone]

    def _drop(self, gone) -> None:
        self.store.flush_rows()
        for ledger in gone:
            self.ledgers.remove(ledger)
            del self._by_id[ledger.ledger_id]
            self.store.db.execute("DELETE FROM entries WHERE ledger_id=?", (ledger.ledger_id,))
            self.store.db.execute("DELETE FROM ledgers WHERE ledger_id=?", (ledger.ledger_id,))
        self._dirty()

    def delete(self) -> None:
        """Drop the managed ledger and everything in it."""
        with self.store.tx():
            self.store.flush_rows()
            for ledger in self.ledgers:
                self.store.db.execute("DELETE FROM entries WHERE ledger_id=?", (ledger.ledger_id,))
            self.store.db.execute("DELETE FROM ledgers WHERE ml=?", (self.name,))
            self.store.db.execute("DELETE FROM cursors WHERE ml=?", (self.name,))
            self.store.db.execute("DELETE FROM managed_ledgers WHERE name=?", (self.name,))
        self.store.managed_ledgers.pop(self.name, None)

    # ---------------------------------------------------------------- stats

    def internal_stats(self, metadata: bool = False) -> dict:
        """ManagedLedgerInternalStats, as GET .../internalStats returns it."""
        cur = self._current()
        lce = self.last_confirmed()
        ledgers = []
        for ledger in self.ledgers:
            is_open = ledger.ledger_id == self.current
            info = {
                "ledgerId": ledger.ledger_id,
                # Pulsar reports the open ledger as 0/0 (its size is only known when closed).
                "entries": 0 if is_open else ledger.entries,
                "size": 0 if is_open else ledger.size,
                "offloaded": False,
                "underReplicated": False,
            }
            if metadata:
                b64 = lambda text: base64.b64encode(text.encode()).decode()  # noqa: E731
                info["metadata"] = (
                    f"LedgerMetadata{{formatVersion=3, ensembleSize=1, writeQuorumSize=1, ackQuorumSize=1, "
                    f"state={'OPEN' if is_open else 'CLOSED'}, digestType=CRC32C, password=OMITTED, "
                    f"ensembles={{0=[engine]}}, customMetadata={{pulsar/managed-ledger=base64:{b64(self.name)}, "
                    f"component=base64:{b64('managed-ledger')}, application=base64:{b64('pulsar')}}}}}"
                )
            ledgers.append(info)
        return {
            "entriesAddedCounter": self.entries_added,
            "numberOfEntries": sum(l.entries for l in self.ledgers),
            "totalSize": sum(l.size for l in self.ledgers),
            "currentLedgerEntries": cur.entries if cur else 0,
            "currentLedgerSize": cur.size if cur else 0,
            "lastLedgerCreatedTimestamp": timestamp_text(self.last_ledger_created)
            if self.last_ledger_created
            else None,
            "lastLedgerCreationFailureTimestamp": None,
            "waitingCursorsCount": 0,
            "pendingAddEntriesCount": 0,
            "lastConfirmedEntry": f"{lce[0]}:{lce[1]}",
            "state": "LedgerOpened" if cur is not None else "Closed",
            "ledgers": ledgers,
            "cursors": {name: c.stats() for name, c in self.cursors.items()},
        }


class Cursor:
    """A durable cursor: mark-delete, individually deleted entries, deleted batch indexes."""

    def __init__(self, ml: ManagedLedger, name: str, state: dict):
        self.ml = ml
        self.name = name
        self.mark_delete: tuple[int, int] = tuple(state.get("md", (-1, -1)))
        self.deleted: set[tuple[int, int]] = {tuple(p) for p in state.get("deleted", [])}
        # (ledgerId, entryId) -> [bits still present (1 = not deleted), batchSize]
        self.batch_deleted: dict[tuple[int, int], list[int]] = {
            (int(k.split(":")[0]), int(k.split(":")[1])): [int(v[0], 16), v[1]]
            for k, v in state.get("batch", {}).items()
        }
        self.batch_index_deletion: bool = state.get("batchIndexDeletion", False)
        self.consumed = state.get("consumed", 0)
        self.ignored_deletes = state.get("ignoredDeletes", 0)
        self.forgotten_batch_indexes = state.get("forgottenBatchIndexes", 0)
        self.last_switch = state.get("lastSwitch", 0)

    def _dirty(self) -> None:
        self.ml.store.dirty(self)

    def save(self) -> None:
        state = {
            "md": list(self.mark_delete),
            "deleted": sorted(self.deleted),
            "batch": {f"{k[0]}:{k[1]}": [format(v[0], "x"), v[1]] for k, v in sorted(self.batch_deleted.items())},
            "batchIndexDeletion": self.batch_index_deletion,
            "consumed": self.consumed,
            "ignoredDeletes": self.ignored_deletes,
            "forgottenBatchIndexes": self.forgotten_batch_indexes,
            "lastSwitch": self.last_switch,
        }
        self.ml.store.db.execute(
            "INSERT INTO cursors(ml, name, state) VALUES(?, ?, ?) ON CONFLICT(ml, name) DO UPDATE SET state=excluded.state",
            (self.ml.name, self.name, orjson.dumps(state).decode()),
        )

    def is_deleted(self, key: tuple[int, int]) -> bool:
        return key <= self.mark_delete or key in self.deleted

    def deleted_batch_bits(self, key: tuple[int, int]) -> int | None:
        """Bits still present of a partly deleted batched entry (None: nothing deleted there)."""
        entry = self.batch_deleted.get(key)
        return entry[0] if entry else None

    def delete(self, positions) -> int:
        """asyncDelete: whole entries, or single batch indexes where batch-index deletion is on.

        A batch-index delete on a cursor without batch-index deletion is silently ignored, as
        ManagedCursorImpl does when batchDeletedIndexes is null. Returns how many were ignored.
        """
        ignored = 0
        mark_delete, deleted, batch_deleted = self.mark_delete, self.deleted, self.batch_deleted
        for p in positions:
            key = tuple(p)
            if key <= mark_delete or key in deleted:
                continue
            size = p.batch_size if isinstance(p, BatchedPosition) else None
            if size and size > 1:
                if not self.batch_index_deletion:
                    ignored += 1
                    continue
                entry = batch_deleted.get(key)
                bits = (entry[0] if entry else (1 << size) - 1) & ~(1 << p.batch_index)
                if bits:
                    if entry:
                        entry[0], entry[1] = bits, size
                    else:
                        batch_deleted[key] = [bits, size]
                    continue
                batch_deleted.pop(key, None)
            deleted.add(key)
            self.consumed += 1
        self.ignored_deletes += ignored
        self._advance()
        self._dirty()
        return ignored

    def mark_delete_to(self, position) -> None:
        """asyncMarkDelete: everything up to position (cumulative)."""
        key = tuple(position)
        if key <= self.mark_delete:
            return
        self.mark_delete = key
        self.deleted = {k for k in self.deleted if k > key}
        self.batch_deleted = {k: v for k, v in self.batch_deleted.items() if k > key}
        self._advance(moved=True)
        self._dirty()

    def _advance(self, moved: bool = False) -> None:
        start = self.mark_delete
        while self.deleted:
            nxt = self.ml.next_position(self.mark_delete)
            if nxt is None or nxt not in self.deleted:
                break
            self.deleted.discard(nxt)
            self.mark_delete = nxt
        # Only a moved mark-delete can free a ledger (everything else that can calls trim itself).
        if moved or self.mark_delete != start:
            self.ml.trim()

    def individually_deleted_text(self) -> str:
        """Pulsar's range-set text, e.g. [(3:4..3:6], (3:8..3:9]]."""
        ranges = []
        for lid, eid in sorted(self.deleted):
            if ranges and ranges[-1][0] == lid and ranges[-1][2] == eid - 1:
                ranges[-1][2] = eid
            else:
                ranges.append([lid, eid - 1, eid])
        return "[" + ", ".join(f"({l}:{a}..{l}:{b}]" for l, a, b in ranges) + "]"

    def stats(self) -> dict:
        read = self.ml.next_position(self.mark_delete)
        if read is None:
            lce = self.ml.last_confirmed()
            read = (lce[0], lce[1] + 1)
        md = self.mark_delete
        backlog = 0
        for ledger in self.ml.ledgers:
            if ledger.ledger_id > md[0]:
                backlog += ledger.entries
            elif ledger.ledger_id == md[0]:
                backlog += max(ledger.entries - md[1] - 1, 0)
        return {
            "markDeletePosition": f"{md[0]}:{md[1]}",
            "readPosition": f"{read[0]}:{read[1]}",
            "waitingReadOp": False,
            "pendingReadOps": 0,
            "messagesConsumedCounter": self.consumed,
            "cursorLedger": -1,
            "cursorLedgerLastEntry": -1,
            "individuallyDeletedMessages": self.individually_deleted_text(),
            "lastLedgerSwitchTimestamp": timestamp_text(self.last_switch) if self.last_switch else "",
            "state": "Open" if self.name == TC_CURSOR else "NoLedger",  # as a real broker shows them
            "active": True,
            "numberOfEntriesSinceFirstNotAckedMessage": backlog + 1,
            "totalNonContiguousDeletedMessagesRange": len(self.individually_deleted_text().split("(")) - 1,
            "subscriptionHavePendingRead": False,
            "subscriptionHavePendingReplayRead": False,
            "properties": {},
        }
