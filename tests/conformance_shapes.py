"""JSON shape comparison for the conformance tests (fast suite and live integration suite).

A shape is the JSON value with every scalar replaced by its JSON type. Maps whose keys are data
(coordinator ids, transaction ids, topic names, config names) are compared by the shapes of
their values, not by their keys.
"""

from __future__ import annotations

import re

# Keys that are data, not fields: ids, txn ids "(0,38)", topic names, subscription names under
# ackedPartitions, config names in runtime/values answers.
_DATA_KEY = re.compile(r"^\d+$|^\(-?\d+,-?\d+\)$|://")
# Parents whose children are keyed by data whatever the key looks like.
MAP_PARENTS = {
    "cursors",
    "properties",
    "ackedPartitions",
    "$item-of-ackedPartitions",
    "producedPartitions",
    "lowWaterMarks",
    "$configuration",
}


def json_type(value) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _is_map(value: dict, parent: str) -> bool:
    if parent in MAP_PARENTS:
        return True
    return bool(value) and all(_DATA_KEY.search(k) for k in value)


def differences(real, ours, where: str = "$", parent: str = "") -> list[str]:
    """Every place where OURS does not have REAL's keys and JSON types (both directions for keys)."""
    if json_type(real) != json_type(ours):
        return [f"{where}: real {json_type(real)}, engine {json_type(ours)}"]
    out: list[str] = []
    if isinstance(real, dict):
        if _is_map(real, parent) or _is_map(ours, parent):
            # a map keyed by data: every value of ours against every value's shape of real
            samples = list(real.values())[:1]
            for key, value in ours.items():
                for sample in samples:
                    out += differences(sample, value, f"{where}[{key!r}]", parent="$item-of-" + parent)
            return out
        for key in real:
            if key not in ours:
                out.append(f"{where}.{key}: missing in the engine (real: {json_type(real[key])})")
        for key in ours:
            if key not in real:
                out.append(f"{where}.{key}: not in the real answer (engine: {json_type(ours[key])})")
        for key in real.keys() & ours.keys():
            out += differences(real[key], ours[key], f"{where}.{key}", parent=key)
    elif isinstance(real, list):
        # first with first and last with last (a ledger list's open ledger has fewer fields)
        if real and ours:
            out += differences(real[0], ours[0], f"{where}[0]", parent=parent)
            if len(real) > 1 and len(ours) > 1:
                out += differences(real[-1], ours[-1], f"{where}[-1]", parent=parent)
    return out
