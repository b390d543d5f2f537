"""Explain why protobuf bytes did not parse: truncated or invalid, and at which byte.

The protobuf runtime only says "Error parsing message". When it fails, this walker goes over
the same bytes with the schema at hand and names the first problem it meets. It runs only on
the error path, so it may be slow; it must never raise anything but WireProblem.
"""

from __future__ import annotations

_VARINT, _I64, _LEN, _SGROUP, _EGROUP, _I32 = range(6)


class WireProblem(Exception):
    def __init__(self, kind: str, offset: int, detail: str):
        super().__init__(detail)
        self.kind = kind  # "truncated" or "invalid"
        self.offset = offset
        self.detail = detail


def read_varint(data: bytes, pos: int, end: int) -> tuple[int, int]:
    start = pos
    value = shift = 0
    while True:
        if pos >= end:
            raise WireProblem("truncated", start, "a varint runs past the end")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7
        if shift >= 70:
            raise WireProblem("invalid", start, "a varint is longer than 10 bytes")


def fields(data: bytes, start: int, end: int, depth: int = 0):
    """Yield (number, wire_type, tag_offset, value_start, value_end) of each field."""
    pos = start
    while pos < end:
        field = _read_field(data, pos, end, depth)
        pos = field[4]
        yield field


def _read_field(data: bytes, pos: int, end: int, depth: int):
    tag_at = pos
    tag, pos = read_varint(data, pos, end)
    number, wire_type = tag >> 3, tag & 7
    if number == 0:
        raise WireProblem("invalid", tag_at, "a tag has field number 0, which protobuf forbids")
    value_start = pos
    if wire_type == _VARINT:
        _, pos = read_varint(data, pos, end)
    elif wire_type in (_I64, _I32):
        pos += 8 if wire_type == _I64 else 4
        if pos > end:
            raise WireProblem(
                "truncated", tag_at, f"field {number} needs {pos - value_start} bytes, {end - value_start} remain"
            )
    elif wire_type == _LEN:
        length, value_start = read_varint(data, pos, end)
        pos = value_start + length
        if pos > end:
            raise WireProblem(
                "truncated", tag_at, f"field {number} claims {length} bytes but only {end - value_start} remain"
            )
    elif wire_type == _SGROUP:
        if depth > 50:
            raise WireProblem("invalid", tag_at, "groups nest too deeply")
        pos = _skip_group(data, pos, end, number, depth + 1)
    else:
        what = (
            "an end-group marker without a start"
            if wire_type == _EGROUP
            else f"wire type {wire_type}, which does not exist"
        )
        raise WireProblem("invalid", tag_at, f"tag 0x{tag:x} has {what}")
    return number, wire_type, tag_at, value_start, pos


def _skip_group(data: bytes, pos: int, end: int, number: int, depth: int) -> int:
    while True:
        if pos >= end:
            raise WireProblem("truncated", pos, f"group {number} is not closed before the end")
        tag, after = read_varint(data, pos, end)
        if tag & 7 == _EGROUP:
            if tag >> 3 == number:
                return after
            raise WireProblem("invalid", pos, f"group {tag >> 3} is closed inside group {number}")
        pos = _read_field(data, pos, end, depth)[4]


def diagnose(data: bytes, start: int, end: int, descriptor) -> WireProblem | None:
    """The first problem in data[start:end] read as `descriptor`, or None if none is found."""
    try:
        _check(data, start, end, descriptor, 0)
    except WireProblem as problem:
        return problem
    except RecursionError:
        return WireProblem("invalid", start, "the message nests too deeply")
    return None


def _check(data: bytes, start: int, end: int, descriptor, depth: int) -> None:
    by_number = {fd.number: fd for fd in descriptor.fields}
    for number, wire_type, tag_at, value_start, value_end in fields(data, start, end, depth):
        fd = by_number.get(number)
        if fd is None:
            continue  # unknown fields are tolerated
        expected = _expected_wire_type(fd)
        if wire_type != expected:
            if fd.is_repeated and wire_type == _LEN and expected != _LEN:
                _check_packed(data, value_start, value_end, expected, fd.name)
            continue  # a known number with another wire type is kept as an unknown field
        if fd.message_type is not None:
            if depth > 50:
                raise WireProblem("invalid", tag_at, "the message nests too deeply")
            try:
                _check(data, value_start, value_end, fd.message_type, depth + 1)
            except WireProblem as inner:
                raise WireProblem(inner.kind, inner.offset, f"in {fd.name}: {inner.detail}") from None


def _check_packed(data: bytes, start: int, end: int, wire_type: int, name: str) -> None:
    pos = start
    while pos < end:
        if wire_type == _VARINT:
            _, pos = read_varint(data, pos, end)
        else:
            pos += 8 if wire_type == _I64 else 4
            if pos > end:
                raise WireProblem("truncated", start, f"the packed {name} ends mid-value")


def _expected_wire_type(fd) -> int:
    if fd.message_type is not None or fd.type in (fd.TYPE_STRING, fd.TYPE_BYTES):
        return _LEN
    if fd.type in (fd.TYPE_DOUBLE, fd.TYPE_FIXED64, fd.TYPE_SFIXED64):
        return _I64
    if fd.type in (fd.TYPE_FLOAT, fd.TYPE_FIXED32, fd.TYPE_SFIXED32):
        return _I32
    return _VARINT


def element_spans(data: bytes, start: int, end: int, number: int) -> list[tuple[int, int, int]]:
    """(tag_offset, value_start, value_end) of each occurrence of length-delimited field `number`,
    as far as the bytes can be walked (a batched container's records)."""
    spans = []
    try:
        for num, wire_type, tag_at, value_start, value_end in fields(data, start, end):
            if num == number and wire_type == _LEN:
                spans.append((tag_at, value_start, value_end))
    except WireProblem:
        pass
    return spans
