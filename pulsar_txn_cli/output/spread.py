"""JSONL lines made on several processes: records whose making costs more than sending them.

`decode -o jsonl` spends most of its CPU turning records into dicts; on a machine with more than one
core, worker processes make and serialize them while this process reads and decodes the input, and the
lines come back in input order, byte for byte what one process writes. Small inputs never start a pool.
"""

from __future__ import annotations

import os
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator

import orjson

WARMUP = 20_000  # weight (decode: records) made in this process before a pool is worth its start
CHUNK = 4_096  # weight per task: large enough that sending it costs little beside making it
MAX_WORKERS = 4


@dataclass
class Spread:
    """records = map(convert, items); a worker instead gets ship(item), small and picklable, and
    remote(ship(item)) must equal convert(item). remote is a module-level function (it is pickled
    by name). weight(item) is the item's share of the work (decode: its record count)."""

    items: Iterable
    convert: Callable[[Any], Any]
    ship: Callable[[Any], Any]
    remote: Callable[[Any], Any]
    weight: Callable[[Any], int] = lambda item: 1


def workers() -> int:
    """Worker processes for this machine: 0 (no pool) on one core."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return 0 if cores < 2 else min(cores, MAX_WORKERS)


def lines(spread: Spread, option: int, count: int) -> Iterator[bytes]:
    """orjson lines of the records in order; the first WARMUP weight here, the rest on `count` workers."""
    items = iter(spread.items)
    made = 0
    for item in items:
        yield orjson.dumps(spread.convert(item), option=option)
        made += spread.weight(item)
        if made >= WARMUP and count:
            break
    else:
        return
    yield from _pooled(items, spread, option, count)


def _pooled(items: Iterator, spread: Spread, option: int, count: int) -> Iterator[bytes]:
    import multiprocessing

    # fork: the workers start at once with every module already imported (POSIX only, as the CLI).
    with multiprocessing.get_context("fork").Pool(count, initializer=_ignore_sigint) as pool:
        pending: deque = deque()
        for chunk in _chunks(items, spread):
            pending.append(pool.apply_async(_make, (spread.remote, chunk, option)))
            # A window of tasks in flight bounds memory; whatever is done already goes out.
            while pending and (len(pending) > 2 * count or pending[0].ready()):
                yield from pending.popleft().get()
        while pending:
            yield from pending.popleft().get()


def _chunks(items: Iterator, spread: Spread) -> Iterator[list]:
    chunk, weight = [], 0
    for item in items:
        chunk.append(spread.ship(item))
        weight += spread.weight(item) or 1
        if weight >= CHUNK:
            yield chunk
            chunk, weight = [], 0
    if chunk:
        yield chunk


def _make(remote: Callable, chunk: list, option: int) -> list[bytes]:
    dumps = orjson.dumps
    return [dumps(remote(item), option=option) for item in chunk]


def _ignore_sigint() -> None:
    """Ctrl-C is the parent's to handle (it stops the pool); a worker must not print a traceback."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
