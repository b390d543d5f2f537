"""Helpers for the `collect` tests around the `fleet` fixture (conftest.py)."""

from __future__ import annotations

import json
from pathlib import Path

STANDIN = Path(__file__).with_name("standin_bookkeeper.py")
URI = "zk+null://127.0.0.1:2181/ledgers"


def args(fleet, out, *extra):
    return [
        "collect",
        "--admin-url",
        fleet["url"],
        "--out",
        str(out),
        "--bookkeeper-shell",
        fleet["shell"],
        "--metadata-service-uri",
        URI,
        *extra,
    ]


def ledgers_of(dump: Path) -> set[tuple[str, int]]:
    return {(o["managedLedger"], o["ledgerId"]) for o in map(json.loads, dump.read_text().splitlines())}


def calls(fleet) -> list[int]:
    path = fleet["calls"]
    return [int(x) for x in path.read_text().split()] if path.exists() else []
