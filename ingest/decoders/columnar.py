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
mapped, unions are resolved branch by branch.

Arrays and maps are read in rounds: a block count for every row that needs one,
then item k of every row that still has items, until no row has any; the items
of all rows are gathered once at the end (rows stay independent, one round reads
all rows' k-th items with the item node). A row whose block announces more than
``ROUND_LIMIT`` items (one long array would cost a round per item) is marked bad
and so re-read by fastavro, which rescues it. Decimals (bytes and fixed) become
128- or 256-bit little-endian integers by one byte ``take`` (big-endian to
little-endian, sign-extended). Recursive records (no Arrow shape) and decimals
read as a different precision or scale raise ``UnsupportedSchema`` at compile
time, and the caller uses the row decoder for that writer schema instead.
"""

from __future__ import annotations

from decimal import Decimal as PyDecimal
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from broker.records.vectorized import (
    VARINT_MAX,
    Rows,
    arange,
    constant,
    interleaving,
    values_of,
)
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
    min_size = 1  # the fewest bytes a value takes (bounds an array's item count)

    def read(self, rows: Rows) -> pa.Array:
        raise NotImplementedError

    def skip(self, rows: Rows) -> None:
        self.read(rows)


class Null(Node):
    min_size = 0

    def __init__(self, out_type: pa.DataType) -> None:
        self.out_type = out_type

    def read(self, rows: Rows) -> pa.Array:
        return pa.nulls(len(rows), self.out_type)


class Refused(Node):
    """A writer branch the reader has no place for: its rows are bad."""

    min_size = 0

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

    def __init__(self, out_type: pa.DataType, int32: bool = False) -> None:
        self.out_type = out_type
        self.int32 = int32  # written as an Avro int: a wider value is corrupt

    def read(self, rows: Rows) -> pa.Array:
        value = rows.long()
        if self.int32:
            rows.mark(pc.or_(pc.less(value, -(2**31)), pc.greater(value, 2**31 - 1)))
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
        self.min_size = size

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
        self.min_size = sum(node.min_size for node, _ in steps)

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


class Decimal(Node):
    """A decimal's two's-complement big-endian unscaled integer (bytes: length-prefixed;
    fixed: ``size`` bytes) as Arrow's decimal128/256, which is the same integer
    little-endian. Values wider than Arrow's 16 or 32 bytes mark their row (fastavro
    then reads it)."""

    def __init__(self, out_type: pa.DataType, size: int | None) -> None:
        self.out_type = out_type
        self.size = size  # None: bytes
        self.width = out_type.byte_width
        widest = pa.decimal128(38, out_type.scale) if self.width == 16 else None
        self.wide = widest or pa.decimal256(76, out_type.scale)
        largest = PyDecimal(10**out_type.precision - 1).scaleb(-out_type.scale)
        self.limit = pa.scalar(largest, self.wide)
        self.negative_limit = pa.scalar(-largest, self.wide)
        self.overrun = VARINT_MAX if size is None else size
        self.min_size = 1 if size is None else size

    def read(self, rows: Rows) -> pa.Array:
        count = len(rows)
        if self.size is None:
            sizes = rows.lengths()
        else:
            sizes = pa.nulls(count, pa.int32()).fill_null(self.size)
        start = rows.pos
        rows.advance(sizes)
        width = self.width
        rows.mark(pc.greater(sizes, width))
        longest = pc.max(sizes).as_py() or 0
        if width == 16 and longest <= 8:
            return self._read_short(rows, start, sizes, longest)
        # Output byte j of value i (little-endian) is input byte start+size-1-j, or
        # the sign (0x00 / 0xFF) of the first input byte where j >= size.
        index = arange(count * width)
        row = pc.divide(index, pa.scalar(width, pa.int32()))
        j = pc.subtract(index, pc.multiply(row, pa.scalar(width, pa.int32())))
        first, size = start.take(row), sizes.take(row)
        inside = pc.less(j, size)
        source = pc.if_else(inside, pc.subtract(pc.add(first, size), pc.add(j, 1)), first)
        byte = rows.data.take(source)
        negative = pc.and_(pc.greater(size, 0), pc.greater_equal(byte, 0x80))
        fill = pc.if_else(negative, pa.scalar(0xFF, pa.uint8()), pa.scalar(0, pa.uint8()))
        # Where j >= size, ``byte`` is the first byte (the sign) of the value.
        out = pc.if_else(inside, byte, fill).buffers()[1]
        # A value with more digits than the precision is corrupt (fastavro reads it,
        # Arrow refuses it): compared at the widest precision, where it fits.
        wide = pa.Array.from_buffers(self.wide, count, [None, out])
        rows.mark(pc.or_(pc.greater(wide, self.limit), pc.less(wide, self.negative_limit)))
        return pa.Array.from_buffers(self.out_type, count, [None, out])

    def _read_short(self, rows: Rows, start: pa.Array, sizes: pa.Array, longest: int) -> pa.Array:
        """Values of at most 8 bytes (precision up to 18, the common case): accumulated
        as int64, big-endian byte by byte, then stored as the low half of each 16-byte
        value with the sign in the high half; a round per byte, not a kernel per byte."""
        count = len(sizes)
        value = pa.nulls(count, pa.int64()).fill_null(0)
        for k in range(longest):
            inside = pc.greater(sizes, k)
            byte = rows.data.take(pc.add(start, pa.scalar(k, pa.int32()))).cast(pa.int64())
            if k == 0:  # the first byte carries the sign
                byte = pc.subtract(
                    byte, pc.multiply(pc.greater_equal(byte, 0x80).cast(pa.int64()), 256)
                )
            shifted = pc.add(pc.multiply(value, 256), byte)
            value = pc.if_else(inside, shifted, value)
        if self.out_type.precision <= 18:
            largest = 10**self.out_type.precision - 1
            rows.mark(pc.or_(pc.greater(value, largest), pc.less(value, -largest)))
        sign = pc.negate(pc.less(value, 0).cast(pa.int64()))  # 0 or -1: the high 8 bytes
        interleave, _ = interleaving(count)
        halves = pa.concat_arrays([value, sign]).take(interleave)
        return pa.Array.from_buffers(self.out_type, count, [None, halves.buffers()[1]])

    def skip(self, rows: Rows) -> None:
        rows.advance(rows.lengths() if self.size is None else self.size)


# Items per block above which a row is left to fastavro (a round per item is slow for a
# handful of very long arrays; short arrays of many rows are the common case).
ROUND_LIMIT = 4096


class Blocks(Node):
    """Avro arrays and maps: blocks of items (count, or -count then the block's byte
    size), ended by a zero count; ``items`` reads one item of every active row."""

    overrun = 2 * VARINT_MAX  # a block header; items are read only inside the row

    def read(self, rows: Rows) -> pa.Array:
        """Rounds over the rows still inside their array (``live``, which shrinks as
        rows reach their end): a block header for those with no items left in their
        block, then one item of each. A row leaves with its position, bad flag and item
        count; every row leaves exactly once, so sorting what left by row index gives
        the new positions of all rows."""
        if not len(rows):
            return pa.array([], self.out_type)
        live = Rows(rows.data, rows.pos, rows.end, rows.bad)
        index = arange(len(rows))  # each live row's index in ``rows``
        left = pa.nulls(len(rows), pa.int64()).fill_null(0)  # items left in its block
        taken = pa.nulls(len(rows), pa.int32()).fill_null(0)  # items read so far
        gone: list[tuple[pa.Array, ...]] = []  # (index, pos, bad, taken) of rows that left
        parts: list[list[pa.Array]] = []
        owners: list[pa.Array] = []
        while len(live):
            # Rows past their end stop (so no read runs further than one item).
            live.mark(pc.less(live.room(), 0))
            header = pc.and_(pc.equal(left, 0), pc.invert(live.bad))
            if pc.any(header).as_py():
                sub = live.subset(header)
                items = sub.long()
                negative = pc.less(items, 0)
                if pc.any(negative).as_py():
                    sized = sub.subset(negative)
                    sized.mark(pc.less(sized.long(), 0))
                    sub.merge(negative, sized)
                    items = pc.abs(items)
                too_many = pc.greater(items, ROUND_LIMIT)
                if self.item_min_size:  # each item takes a byte at least
                    room = pc.max_element_wise(sub.room(), 0).cast(pa.int64())
                    too_many = pc.or_(too_many, pc.greater(items, room))
                sub.mark(pc.or_(too_many, pc.less(items, 0)))  # -2**63 stays negative
                live.merge(header, sub)
                left = pc.replace_with_mask(left, header, pc.if_else(sub.bad, 0, items))
            leaving = pc.or_(live.bad, pc.equal(left, 0))  # bad, or read the ending 0
            if pc.any(leaving).as_py():
                gone.append(
                    (
                        index.filter(leaving),
                        live.pos.filter(leaving),
                        live.bad.filter(leaving),
                        taken.filter(leaving),
                    )
                )
                staying = pc.invert(leaving)
                live = live.subset(staying)
                index, left, taken = (
                    index.filter(staying),
                    left.filter(staying),
                    taken.filter(staying),
                )
                if not len(live):
                    break
            parts.append(self.items(live))
            owners.append(index)
            left = pc.subtract(left, 1)
            taken = pc.add(taken, pa.scalar(1, pa.int32()))
        order = pc.sort_indices(pa.concat_arrays([g[0] for g in gone]))
        rows.pos = pa.concat_arrays([g[1] for g in gone]).take(order)
        rows.bad = pa.concat_arrays([g[2] for g in gone]).take(order)
        lengths = pa.concat_arrays([g[3] for g in gone]).take(order)
        return self.assemble(lengths, parts, owners)

    def gathered(self, lengths, parts, owners, which: int, empty: pa.DataType) -> pa.Array:
        """Item field ``which`` of all rounds, in row order then item order."""
        if not parts:
            return pa.array([], empty)
        values = pa.concat_arrays([p[which] for p in parts])
        if len(parts) == 1:
            return values
        order = pc.sort_indices(pa.concat_arrays(owners))  # stable: rounds stay in order
        return values.take(order)

    @staticmethod
    def offsets(lengths: pa.Array) -> pa.Array:
        return pa.concat_arrays([pa.array([0], pa.int32()), pc.cumulative_sum(lengths)])


class Array(Blocks):
    def __init__(self, item: Node, out_type: pa.DataType) -> None:
        self.item = item
        self.item_min_size = item.min_size
        self.out_type = out_type
        self.overrun = Blocks.overrun + item.overrun

    def items(self, rows: Rows) -> list[pa.Array]:
        return [self.item.read(rows)]

    def assemble(self, lengths, parts, owners) -> pa.Array:
        item_type = self.out_type.value_type
        values = self.gathered(lengths, parts, owners, 0, item_type).cast(item_type)
        return pa.ListArray.from_arrays(self.offsets(lengths), values, type=self.out_type)


class Map(Blocks):
    def __init__(self, value: Node, out_type: pa.DataType) -> None:
        self.key = Bytes(utf8=True, out_type=pa.string())
        self.value = value
        self.item_min_size = 1 + value.min_size
        self.out_type = out_type
        self.overrun = Blocks.overrun + VARINT_MAX + value.overrun

    def items(self, rows: Rows) -> list[pa.Array]:
        return [self.key.read(rows), self.value.read(rows)]

    def assemble(self, lengths, parts, owners) -> pa.Array:
        item_type = self.out_type.item_type
        # A key that is not UTF-8 marked its row bad; an empty key keeps the map valid.
        keys = self.gathered(lengths, parts, owners, 0, pa.string()).fill_null("")
        values = self.gathered(lengths, parts, owners, 1, item_type).cast(item_type)
        return pa.MapArray.from_arrays(self.offsets(lengths), keys, values, type=self.out_type)


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
        if wk == "union":
            out = self.out(r)
            return Union([self._branch(b, r, out) for b in w], out)
        if rk == "union":
            target = self._reader_branch(w, r)
            if target is None:
                raise Unresolvable(f"no branch of the reader union reads a writer {wk}")
            node = self.resolve(w, target)
            return node
        decimal = self._decimal(w, r)
        if decimal is not None:
            return decimal
        if wk != rk and (wk, rk) not in PROMOTIONS:
            raise Unresolvable(f"a writer {wk} cannot be read as a {rk}")
        out = self.out(r)
        if wk == "null":
            return Null(out)
        if wk == "boolean":
            return Boolean()
        if wk in ("int", "long"):
            return Varint(out, int32=wk == "int")
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
        if wk == "array":
            return Array(self.resolve(w["items"], r["items"]), out)
        if wk == "map":
            return Map(self.resolve(w["values"], r["values"]), out)
        raise UnsupportedSchema(f"Avro type {wk}")

    def _decimal(self, w: Any, r: Any) -> Decimal | None:
        """The node for a decimal read as the same decimal; None when neither side is
        a decimal; UnsupportedSchema for the other mixes (the row decoder's)."""
        wd, rd = _decimal_type(self.writer, w), _decimal_type(self.reader, r)
        if wd is None and rd is None:
            return None
        if wd is None or rd is None or wd != rd or kind(self.writer, w) != kind(self.reader, r):
            raise UnsupportedSchema("a decimal read as another type: read by the row decoder")
        return Decimal(rd, w["size"] if kind(self.writer, w) == "fixed" else None)

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


def _decimal_type(schema: ParsedSchema, node: Any) -> pa.DataType | None:
    found = logical_type(schema, node)
    return found if found is not None and pa.types.is_decimal(found) else None


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
    if what == "array":
        return [_default_value(schema, node["items"], v) for v in value]
    if what == "map":
        return [(k, _default_value(schema, node["values"], v)) for k, v in value.items()]
    return value
