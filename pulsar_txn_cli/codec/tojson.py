"""Records -> the documented JSON shape, through converters compiled from the message descriptors.

`decode -o jsonl` of a million records spends most of its time here, so instead of walking
ListFields() generically, each message type gets straight-line Python generated once from its
descriptor: one HasField test and one attribute read per field, enum numbers mapped to names,
strings checked for UTF-8 (upb hands back bytes for a proto2 string that is not valid UTF-8;
it is shown lossy). Keys are the fields' JSON names (lowerCamelCase, `txnidMostBits`), as in
protobuf's JSON mapping and Pulsar's REST answers. This reads every field about as fast as hand-written code would.
"""

from __future__ import annotations

import keyword


def text(value) -> str:
    return value if value.__class__ is str else value.decode("utf-8", "replace")


def texts(values) -> list:
    out = values[:]  # a list; slicing a upb repeated field is cheaper than list()
    return out if bytes not in map(type, out) else [text(v) for v in out]


class _Compiler:
    def __init__(self) -> None:
        self.namespace: dict = {"_text": text, "_texts": texts}
        self.count = 0

    def constant(self, prefix: str, value) -> str:
        self.count += 1
        name = f"_{prefix}{self.count}"
        self.namespace[name] = value
        return name

    def body(self, descriptor, indent: str, locals_: dict | None = None) -> list[str]:
        """Statements that copy the set fields of message `m` into dict `out` (fields named in
        locals_ were already read into those local variables)."""
        # Bind HasField once when it will likely be called (a field always needs it, or many
        # optional fields may be absent); else call it only on the rare falsy value.
        optional = [fd for fd in descriptor.fields if not (fd.is_required or fd.is_repeated)]
        bind = len(optional) >= 3 or any(fd.message_type or fd.default_value for fd in optional)
        lines = [f"{indent}hf = m.HasField"] if bind else []
        lazy = "hf" if bind else "m.HasField"
        for fd in descriptor.fields:
            name = fd.name
            attr = f"m.{name}" if name.isidentifier() and not keyword.iskeyword(name) else f"getattr(m, {name!r})"
            attr = (locals_ or {}).get(name, attr)
            key = fd.json_name  # protobuf's JSON name (lowerCamelCase): one key casing, as Pulsar's REST
            if fd.enum_type is not None:
                labels = self.constant("E", {v.number: v.name for v in fd.enum_type.values})
                one = f"{labels}[{{}}]"  # closed proto2 enums: upb keeps unknown numbers out
            elif fd.message_type is not None:
                one = f"{self.constant('C', self.message(fd.message_type))}({{}})"
            elif fd.type == fd.TYPE_STRING:
                one = "_text({})"
            else:
                one = "{}"
            if fd.is_repeated:
                if one == "{}":
                    value = "v[:]"
                elif one == "_text({})":
                    value = "_texts(v)"
                else:
                    value = f"[{one.format('x')} for x in v]"
                lines.append(f"{indent}v = {attr}")
                lines.append(f"{indent}if v: out[{key!r}] = {value}")
                continue
            if fd.is_required:  # always set in a decoded record (decode_entry checks them)
                value = "v if v.__class__ is str else _text(v)" if one == "_text({})" else one.format("v")
                lines.append(f"{indent}v = {attr}; out[{key!r}] = {value}")
                continue
            if fd.message_type is not None:
                lines.append(f"{indent}if hf({name!r}): out[{key!r}] = {one.format(attr)}")
                continue
            value = "v if v.__class__ is str else _text(v)" if one == "_text({})" else one.format("v")
            if fd.default_value:  # e.g. PendingAckOp, whose default is ACK = 1: only HasField tells
                lines.append(f"{indent}if hf({name!r}):")
                lines.append(f"{indent}    v = {attr}; out[{key!r}] = {value}")
            else:
                lines.append(f"{indent}v = {attr}")
                # A value other than the (falsy) default means the field is set; only a falsy
                # value needs HasField, which costs more than reading the value.
                lines.append(f"{indent}if v or {lazy}({name!r}): out[{key!r}] = {value}")
        return lines

    def compile(self, source: str, name: str):
        exec(compile(source, f"<pulsar_txn_cli.codec.tojson {name}>", "exec"), self.namespace)  # noqa: S102
        return self.namespace[name]

    def message(self, descriptor):
        """m -> dict for a nested message type."""
        name = f"message_{descriptor.name}"
        source = "\n".join([f"def {name}(m):", "    out = {}", *self.body(descriptor, "    "), "    return out"])
        return self.compile(source, name)

    def record(self, descriptor):
        """(m, out) -> out, filling a dict that already holds batchIndex/txnId."""
        name = f"record_{descriptor.name}"
        source = "\n".join([f"def {name}(m, out):", *self.body(descriptor, "    "), "    return out"])
        return self.compile(source, name)

    def records(self, descriptor):
        """(records, batched) -> list of dicts: the loop itself is generated, no call per record."""
        name = f"records_{descriptor.name}"
        source = "\n".join(
            [
                f"def {name}(records, batched):",
                "    result = []",
                "    append = result.append",
                "    for index, m in enumerate(records):",
                "        most = m.txnid_most_bits",
                "        least = m.txnid_least_bits",
                "        txn = f'({most},{least})'",
                "        out = {'batchIndex': index, 'txnId': txn} if batched else {'txnId': txn}",
                *self.body(descriptor, "        ", {"txnid_most_bits": "most", "txnid_least_bits": "least"}),
                "        append(out)",
                "    return result",
            ]
        )
        return self.compile(source, name)


def converters(descriptor):
    """(record(m, out), records(list, batched)) for a top-level record type with txnid fields."""
    compiler = _Compiler()
    return compiler.record(descriptor), compiler.records(descriptor)


# The native renderer's kinds (_render.c numbers them the same); other types are not in the logs.
_NATIVE_KINDS = {
    "TYPE_UINT64": 0,
    "TYPE_INT64": 1,
    "TYPE_UINT32": 2,
    "TYPE_INT32": 3,
    "TYPE_BOOL": 4,
    "TYPE_ENUM": 5,
    "TYPE_STRING": 6,
    "TYPE_MESSAGE": 7,
}


def native_spec(descriptor):
    """The record type's field table for the native renderer (codec/_render.c), from the same
    descriptors as the converters above: field order, JSON names and enum names, each key and
    name already a JSON string as orjson writes it. Raises ValueError for a type it lacks."""
    import orjson
    from google.protobuf.descriptor import FieldDescriptor

    kinds = {getattr(FieldDescriptor, name): kind for name, kind in _NATIVE_KINDS.items()}
    messages: list = []
    index: dict = {}

    def add(message) -> int:
        if message.full_name not in index:
            index[message.full_name] = len(messages)
            messages.append(None)
            fields = []
            for fd in message.fields:
                if fd.type not in kinds:
                    raise ValueError(f"{message.name}.{fd.name}: the native renderer has no kind for its type")
                names = [(v.number, orjson.dumps(v.name)) for v in fd.enum_type.values] if fd.enum_type else None
                nested = add(fd.message_type) if fd.message_type else -1
                key = orjson.dumps(fd.json_name) + b":"
                fields.append((fd.number, kinds[fd.type], key, fd.is_repeated, fd.is_required, names, nested))
            messages[index[message.full_name]] = tuple(fields)
        return index[message.full_name]

    add(descriptor)
    txnid = descriptor.fields_by_name
    for name in ("txnid_most_bits", "txnid_least_bits"):  # txnId's text reads them; unset means 0
        if txnid[name].default_value != 0:
            raise ValueError(f"{descriptor.name}.{name} has a default other than 0")
    return tuple(messages), txnid["txnid_most_bits"].number, txnid["txnid_least_bits"].number
