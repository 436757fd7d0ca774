"""Columnar Avro decoding: every row of a chunk at once, one field at a time.

Avro's binary encoding has no per-field offsets, so a record must be read field
after field. But the rows of a chunk are independent: field k of every row can
be read together once field k-1 of every row has been read. This module keeps
one read position per row (an Arrow int32 array into one shared byte buffer)
and reads each field for all rows with Arrow compute kernels: varints by
gathering byte k of every row (one more round only while some row's varint
goes on), strings and fixed values by one binary ``take`` over interleaved
offsets into the buffer (one memcpy per value, see ``Rows.slices``). Python
runs per field, C++ per row, so decoding goes straight to Arrow columns without
a Python object per value: about 12x fastavro per record on the PageViewEvent
schemas (docs/benchmarks.md, "Ingest: decode").

Each row ends where its Kafka value ends, so every row is checked exactly: a
row is bad when its reads pass its end, a length is negative or longer than
the rest of the row, a union or
enum index is out of range, a string is not UTF-8, a value has no place in the
reader schema (a null where the target has none, an enum symbol it lacks), or
the row's bytes are not all consumed. A bad row never disturbs its neighbours
(positions are per row); the caller re-reads bad rows one by one to name the
reason.

Schema resolution (Avro specification: writer schema read as the reader schema)
is compiled once per (writer, reader) pair: writer fields absent from the
reader are skipped, reader fields absent from the writer get their default,
int/long/float promotions and string<->bytes are casts, enum symbols are
mapped, unions are resolved branch by branch. Shapes this module does not read
(arrays, maps, decimals, recursive records, unions of several non-null types)
raise ``UnsupportedSchema`` at compile time, and the caller uses the row
decoder for that writer schema instead.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from broker.records.vectorized import VARINT_MAX, Rows, constant, values_of
from ingest.decoders.arrow_types import UnsupportedSchema, arrow_type, logical_type
from schemas.canonical import ParsedSchema, kind
from schemas.compatibility import PROMOTIONS

_FIXED_WIDTH = {"float": (4, pa.float32()), "double": (8, pa.float64())}
_INT32_BASED = (pa.date32(), pa.time32("ms"), pa.int32())


class Unresolvable(ValueError):
    """The writer schema cannot be read as the reader schema at all."""


# -- nodes: each reads its value for every row of a Rows ------------------------


class Node:
    out_type: pa.DataType
    overrun = 0  # how far past a corrupt row's end its reads can go

    def read(self, rows: Rows) -> pa.Array:
        raise NotImplementedError

    def skip(self, rows: Rows) -> None:
        self.read(rows)


class Null(Node):
    def __init__(self, out_type: pa.DataType) -> None:
        self.out_type = out_type

    def read(self, rows: Rows) -> pa.Array:
        return pa.nulls(len(rows), self.out_type)


class Refused(Node):
    """A writer branch the reader has no place for: its rows are bad."""

    def __init__(self, out_type: pa.DataType) -> None:
        self.out_type = out_type

    def read(self, rows: Rows) -> pa.Array:
        rows.mark(pa.nulls(len(rows), pa.bool_()).fill_null(True))
        return pa.nulls(len(rows), self.out_type)


class Boolean(Node):
    out_type = pa.bool_()
    overrun = 1

    def read(self, rows: Rows) -> pa.Array:
        value = pc.not_equal(rows.byte(0), 0)
        rows.advance(1)
        return value


class Varint(Node):
    overrun = VARINT_MAX

    def __init__(self, out_type: pa.DataType) -> None:
        self.out_type = out_type

    def read(self, rows: Rows) -> pa.Array:
        value = rows.long()
        if value.type == self.out_type:
            return value
        if self.out_type in _INT32_BASED:  # Arrow casts these from int32 only
            value = value.cast(pa.int32(), safe=False)
        return value.cast(self.out_type, safe=False)

    def skip(self, rows: Rows) -> None:
        rows.varint()


class FixedWidth(Node):
    """float, double and fixed: ``size`` raw bytes per row."""

    def __init__(self, size: int, raw_type: pa.DataType, out_type: pa.DataType) -> None:
        self.size = size
        self.raw_type = raw_type
        self.out_type = out_type
        self.overrun = size

    def read(self, rows: Rows) -> pa.Array:
        count = len(rows)
        # A row too short for the value reads into the padding: the final
        # position check marks it.
        raw = rows.slices(pa.nulls(count, pa.int32()).fill_null(self.size))
        # Little-endian IEEE floats are Arrow's own layout on the machines we run on.
        value = pa.Array.from_buffers(self.raw_type, count, [None, values_of(raw)])
        return value if value.type == self.out_type else value.cast(self.out_type)

    def skip(self, rows: Rows) -> None:
        rows.advance(self.size)


class Bytes(Node):
    """bytes and string (UTF-8 checked), with string<->bytes promotion."""

    overrun = VARINT_MAX  # the length prefix; the length itself is clamped

    def __init__(self, utf8: bool, out_type: pa.DataType) -> None:
        self.utf8 = utf8
        self.out_type = out_type

    def read(self, rows: Rows) -> pa.Array:
        binary = rows.slices(rows.lengths())
        if not pa.types.is_string(self.out_type):
            return binary
        offsets, data = binary.buffers()[1], binary.buffers()[2]
        text = pa.Array.from_buffers(pa.string(), len(binary), [None, offsets, data])
        try:
            text.validate(full=True)  # UTF-8
        except pa.ArrowInvalid:
            invalid = _not_utf8(binary)
            rows.mark(invalid)
            text = pc.if_else(invalid, pa.scalar(None, pa.binary()), binary).cast(pa.string())
        return text

    def skip(self, rows: Rows) -> None:
        sizes = rows.lengths()  # reads the length prefix: pos moves past it first
        rows.pos = pc.add(rows.pos, sizes)


def _not_utf8(binary: pa.Array) -> pa.Array:
    """Which values are not UTF-8 (row by row: only reached for corrupt data)."""

    def invalid(value: bytes | None) -> bool:
        try:
            value.decode("utf-8")
        except UnicodeDecodeError:
            return True
        return False

    return pa.array([invalid(v) for v in binary.to_pylist()], pa.bool_())


class Enum(Node):
    out_type = pa.string()
    overrun = VARINT_MAX

    def __init__(self, symbols: list[str | None]) -> None:
        # symbols[i]: the reader symbol for writer index i, None when it has none.
        self.symbols = pa.array(symbols, pa.string())
        self.unmapped = pa.array([s is None for s in symbols], pa.bool_())

    def read(self, rows: Rows) -> pa.Array:
        index = rows.long()
        outside = pc.or_(pc.less(index, 0), pc.greater_equal(index, len(self.symbols)))
        index = pc.if_else(outside, 0, index)
        rows.mark(pc.or_(outside, self.unmapped.take(index)))
        return self.symbols.take(index)

    def skip(self, rows: Rows) -> None:
        rows.varint()


class Record(Node):
    def __init__(
        self,
        steps: list[tuple[Node, int | None]],
        defaults: dict[int, tuple[Any, pa.DataType]],
        fields: list[pa.Field],
    ) -> None:
        self.steps = steps  # writer order: (node, reader slot or None to skip)
        self.defaults = defaults  # reader slot -> (python default, arrow type)
        self.fields = fields
        self.out_type = pa.struct(fields)
        self.overrun = sum(node.overrun for node, _ in steps)

    def read(self, rows: Rows) -> pa.Array:
        columns: list[pa.Array | None] = [None] * len(self.fields)
        for node, slot in self.steps:
            if slot is None:
                node.skip(rows)
            else:
                columns[slot] = node.read(rows)
        for slot, (value, physical) in self.defaults.items():
            columns[slot] = constant(value, physical, len(rows)).cast(self.fields[slot].type)
        return pa.StructArray.from_arrays(columns, fields=self.fields)

    def skip(self, rows: Rows) -> None:
        for node, _ in self.steps:
            node.skip(rows)


class Union(Node):
    def __init__(self, branches: list[Node], out_type: pa.DataType) -> None:
        self.branches = branches  # per writer branch; Null for null
        self.out_type = out_type
        self.overrun = VARINT_MAX + max(b.overrun for b in branches)

    def read(self, rows: Rows) -> pa.Array:
        count = len(rows)
        which = rows.long()
        outside = pc.or_(pc.less(which, 0), pc.greater_equal(which, len(self.branches)))
        rows.mark(outside)
        index = pa.nulls(count, pa.int64())
        parts: list[pa.Array] = []
        base = 0
        for j, branch in enumerate(self.branches):
            if isinstance(branch, Null):
                continue
            mask = pc.equal(which, j)
            taken = pc.sum(mask).as_py() or 0
            if taken == 0:
                continue
            if taken == count:  # the common case: every row took this branch
                return branch.read(rows).cast(self.out_type)
            sub = rows.subset(mask)
            parts.append(branch.read(sub).cast(self.out_type))
            rows.merge(mask, sub)
            rank = pc.add(pc.cumulative_sum(mask.cast(pa.int64())), base - 1)
            index = pc.if_else(mask, rank, index)
            base += taken
        if not parts:
            return pa.nulls(count, self.out_type)
        values = parts[0] if len(parts) == 1 else pa.concat_arrays(parts)
        return values.take(index)


# -- compiling a (writer, reader) pair into nodes -------------------------------


def decode_rows(
    plan: Node, data: pa.Array, starts: pa.Array, ends: pa.Array
) -> tuple[pa.StructArray, pa.BooleanArray]:
    """Decode the Avro bodies ``data[starts[i]:ends[i]]`` with a compiled plan: the
    rows as a struct array, and which rows are bad (drop their struct entries).
    ``data`` must have ``required_pad(plan)`` spare bytes after the last end."""
    rows = Rows.over(data, starts, ends)
    struct = plan.read(rows)
    return struct, rows.finish()  # every byte of a row must be read


def required_pad(plan: Node) -> int:
    return plan.overrun + VARINT_MAX


def compile_plan(writer: ParsedSchema, reader: ParsedSchema) -> Node:
    """The node reading ``writer``-encoded rows as ``reader``; raises UnsupportedSchema
    for shapes read by the row decoder instead, Unresolvable when no row can be read."""
    return _Compiler(writer, reader).resolve(writer.tree, reader.tree)


class _Compiler:
    def __init__(self, writer: ParsedSchema, reader: ParsedSchema) -> None:
        self.writer = writer
        self.reader = reader
        self.inside: set[str] = set()

    def out(self, node: Any) -> pa.DataType:
        return arrow_type(self.reader, node)

    def resolve(self, w: Any, r: Any) -> Node:
        w, r = self.writer.resolve(w), self.reader.resolve(r)
        wk, rk = kind(self.writer, w), kind(self.reader, r)
        if wk in ("array", "map") or rk in ("array", "map"):
            raise UnsupportedSchema(f"{wk}/{rk}: read by the row decoder")
        for node, schema in ((w, self.writer), (r, self.reader)):
            if logical_type(schema, node) is not None and pa.types.is_decimal(
                logical_type(schema, node)
            ):
                raise UnsupportedSchema("decimal: read by the row decoder")
        if wk == "union":
            out = self.out(r)
            return Union([self._branch(b, r, out) for b in w], out)
        if rk == "union":
            target = self._reader_branch(w, r)
            if target is None:
                raise Unresolvable(f"no branch of the reader union reads a writer {wk}")
            node = self.resolve(w, target)
            return node
        if wk != rk and (wk, rk) not in PROMOTIONS:
            raise Unresolvable(f"a writer {wk} cannot be read as a {rk}")
        out = self.out(r)
        if wk == "null":
            return Null(out)
        if wk == "boolean":
            return Boolean()
        if wk in ("int", "long"):
            return Varint(out)
        if wk in _FIXED_WIDTH:
            size, raw = _FIXED_WIDTH[wk]
            return FixedWidth(size, raw, out)
        if wk in ("string", "bytes"):
            return Bytes(utf8=pa.types.is_string(out), out_type=out)
        if wk == "fixed":
            if w["size"] != r["size"] or _short(w["name"]) != _short(r["name"]):
                raise Unresolvable(f"fixed {w['name']} cannot be read as {r['name']}")
            return FixedWidth(w["size"], pa.binary(w["size"]), out)
        if wk == "enum":
            return self._enum(w, r)
        if wk == "record":
            return self._record(w, r)
        raise UnsupportedSchema(f"Avro type {wk}")

    def _branch(self, w: Any, r: Any, out: pa.DataType) -> Node:
        wk = kind(self.writer, w)
        if wk == "null":
            readable = kind(self.reader, r) == "null" or (
                kind(self.reader, r) == "union" and any(kind(self.reader, b) == "null" for b in r)
            )
            return Null(out) if readable else Refused(out)
        try:
            return self.resolve(w, r)
        except Unresolvable:
            return Refused(out)

    def _reader_branch(self, w: Any, union: list) -> Any | None:
        """The first reader branch matching the writer type exactly, else the first
        it promotes to (the specification's rule for a union reader)."""
        wk = kind(self.writer, w)
        named = wk in ("record", "enum", "fixed")
        for exact in (True, False):
            for b in union:
                bk = kind(self.reader, b)
                if named and bk == wk:
                    if _short(self.reader.resolve(b)["name"]) == _short(w["name"]):
                        return b
                elif not named and (bk == wk if exact else (wk, bk) in PROMOTIONS):
                    return b
        return None

    def _enum(self, w: dict, r: dict) -> Enum:
        if _short(w["name"]) != _short(r["name"]):
            raise Unresolvable(f"enum {w['name']} cannot be read as {r['name']}")
        known = set(r["symbols"])
        default = r.get("default")
        return Enum([s if s in known else default for s in w["symbols"]])

    def _record(self, w: dict, r: dict) -> Record:
        if _short(w["name"]) != _short(r["name"]) and w["name"] not in r.get("aliases", []):
            raise Unresolvable(f"record {w['name']} cannot be read as {r['name']}")
        if w["name"] in self.inside:
            raise UnsupportedSchema(f"recursive record {w['name']}: read by the row decoder")
        self.inside.add(w["name"])
        try:
            fields = [pa.field(f["name"], self.out(f["type"])) for f in r["fields"]]
            slots: dict[str, int] = {}
            for i, f in enumerate(r["fields"]):
                for name in [f["name"], *f.get("aliases", [])]:
                    slots.setdefault(name, i)
            steps: list[tuple[Node, int | None]] = []
            filled: set[int] = set()
            for f in w["fields"]:
                slot = slots.get(f["name"])
                if slot is None or slot in filled:
                    steps.append((self._skipper(f["type"]), None))
                    continue
                filled.add(slot)
                steps.append((self.resolve(f["type"], r["fields"][slot]["type"]), slot))
            defaults = {}
            for i, f in enumerate(r["fields"]):
                if i in filled:
                    continue
                if "default" not in f:
                    raise Unresolvable(f"reader field {f['name']} has no default")
                defaults[i] = (
                    _default_value(self.reader, f["type"], f["default"]),
                    arrow_type(self.reader, f["type"], physical=True),
                )
            return Record(steps, defaults, fields)
        finally:
            self.inside.discard(w["name"])

    def _skipper(self, w: Any) -> Node:
        """A node that reads a writer-only field (it is read to move past it)."""
        inner = _Compiler(self.writer, self.writer)
        inner.inside = self.inside
        return inner.resolve(w, w)


def _short(name: str) -> str:
    return name.rsplit(".", 1)[-1]


def _default_value(schema: ParsedSchema, node: Any, value: Any) -> Any:
    """An Avro JSON default as the Python value pyarrow builds the physical type from."""
    node = schema.resolve(node)
    what = kind(schema, node)
    if what == "union":
        return _default_value(schema, node[0], value)
    if value is None:
        return None
    if what in ("bytes", "fixed"):
        return value.encode("latin-1")  # JSON defaults spell bytes as code points 0-255
    if what == "record":
        return {
            f["name"]: _default_value(schema, f["type"], value.get(f["name"], f.get("default")))
            for f in node["fields"]
        }
    return value
