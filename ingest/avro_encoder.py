"""Arrow columns to Avro binary, a column at a time: the Avro writer's encoder.

Every row's Avro body is the concatenation of its fields' encodings, and each field
can be encoded for all rows at once: integers as zigzag varints
(``vectorized.zigzag_varints``), strings and bytes as a varint length joined to the
value, floats as their little-endian bytes (Arrow's own layout), a record as its
fields joined row by row (``binary_join_element_wise``), a ``[null, T]`` union as the
branch index joined to T's encoding of the non-null rows, an array or map as its
items encoded flat, joined per row (``binary_join`` over the list offsets) between a
block count and the closing zero. The result is a binary array of one Avro body per
row, whose value bytes are, back to back, the data of an Avro container block.

Decimals are written as two's complement big-endian: fixed decimals in their size,
bytes decimals in all 16 (or 32) bytes of Arrow's decimal (a longer encoding than
needed; every reader takes any length). Enum symbols are written as their index in the
schema's symbols. Types are those of ``arrow_types.arrow_type`` for the same schema.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from broker.records.vectorized import arange, zigzag_varints
from ingest.decoders.arrow_types import logical_type
from schemas.canonical import ParsedSchema, kind

Encode = Callable[[pa.Array], pa.Array]  # Arrow values (any nulls allowed only in unions)

_FLOAT_WIDTH = {"float": 4, "double": 8}


def compile_encoder(schema: ParsedSchema, node: Any = None) -> Encode:
    """The encoder of ``node`` (the schema's top when None) for arrays of its Arrow type."""
    return _encoder(schema, schema.tree if node is None else node)


def _empty(count: int) -> pa.Array:
    return pa.nulls(count, pa.binary()).fill_null(b"")


def _join(parts: list[pa.Array], count: int) -> pa.Array:
    parts = [p for p in parts if p is not None]
    if not parts:
        return _empty(count)
    if len(parts) == 1:
        return parts[0]
    return pc.binary_join_element_wise(*parts, b"")


def _encoder(schema: ParsedSchema, node: Any) -> Encode:
    node = schema.resolve(node)
    what = kind(schema, node)
    logical = logical_type(schema, node)
    if logical is not None and pa.types.is_decimal(logical):
        return _decimal(logical, node["size"] if what == "fixed" else None)
    if what == "null":
        return lambda values: _empty(len(values))
    if what == "boolean":
        return lambda values: _fixed_width(values.cast(pa.uint8()), 1)
    if what in ("int", "long"):
        return _integers
    if what in _FLOAT_WIDTH:
        width = _FLOAT_WIDTH[what]
        return lambda values: _fixed_width(values, width)
    if what in ("string", "bytes"):
        return _bytes
    if what == "fixed":
        return lambda values: values.cast(pa.binary())
    if what == "enum":
        symbols = pa.array(node["symbols"], pa.string())
        return lambda values: zigzag_varints(pc.index_in(values, value_set=symbols))
    if what == "record":
        fields = [(f["name"], _encoder(schema, f["type"])) for f in node["fields"]]

        def record(values: pa.Array) -> pa.Array:
            return _join([encode(values.field(name)) for name, encode in fields], len(values))

        return record
    if what == "union":
        return _nullable(schema, node)
    if what == "array":
        return _blocks([_encoder(schema, node["items"])], lambda flat: [flat])
    if what == "map":
        values = _encoder(schema, node["values"])
        return _blocks([_bytes, values], lambda flat: [flat.field("key"), flat.field("value")])
    raise ValueError(f"no Avro encoding for {what!r}")


def _integers(values: pa.Array) -> pa.Array:
    typ = values.type
    if pa.types.is_timestamp(typ) or pa.types.is_time64(typ):
        values = values.cast(pa.int64())
    elif pa.types.is_date32(typ) or pa.types.is_time32(typ):
        values = values.cast(pa.int32())
    return zigzag_varints(values)


def _fixed_width(values: pa.Array, width: int) -> pa.Array:
    """The values' own bytes (little-endian, Avro's layout for floats), ``width`` each."""
    raw = pa.Array.from_buffers(
        pa.binary(width), len(values), [None, values.buffers()[1]], offset=values.offset
    )
    return raw.cast(pa.binary())


def _bytes(values: pa.Array) -> pa.Array:
    values = values.cast(pa.binary())
    return _join([zigzag_varints(pc.binary_length(values)), values], len(values))


def _decimal(typ: pa.DataType, size: int | None) -> Encode:
    width = typ.byte_width
    out = width if size is None else size
    if out > width:
        raise ValueError(f"a fixed decimal of {size} bytes is wider than Arrow's {width}")

    def encode(values: pa.Array) -> pa.Array:
        count = len(values)
        data = pa.Array.from_buffers(
            pa.uint8(), (values.offset + count) * width, [None, values.buffers()[1]]
        )
        # Byte j (big-endian) of value i: byte width-1-j of its little-endian integer;
        # only the last ``out`` of them (a fixed size below the width drops sign bytes).
        index = arange(count * out)
        row = pc.divide(index, pa.scalar(out, pa.int32()))
        j = pc.subtract(index, pc.multiply(row, pa.scalar(out, pa.int32())))
        source = pc.subtract(
            pc.multiply(pc.add(row, values.offset + 1), pa.scalar(width, pa.int32())),
            pc.add(j, 1 + width - out),
        )
        body = data.take(source)
        offsets = pc.multiply(arange(count + 1), pa.scalar(out, pa.int32()))
        encoded = pa.Array.from_buffers(
            pa.binary(), count, [None, offsets.buffers()[1], body.buffers()[1]]
        )
        if size is None:
            lengths = pa.nulls(count, pa.int64()).fill_null(out)
            return _join([zigzag_varints(lengths), encoded], count)
        return encoded

    return encode


def _nullable(schema: ParsedSchema, branches: list) -> Encode:
    """A union of null and one type (the only unions the load's Arrow types have)."""
    kinds = [kind(schema, b) for b in branches]
    null_at = kinds.index("null")
    others = [i for i, k in enumerate(kinds) if k != "null"]
    if not others:
        tag = zigzag_varints(pa.array([null_at], pa.int64()))[0].as_py()
        return lambda values: pa.nulls(len(values), pa.binary()).fill_null(tag)
    if len(others) > 1:
        raise ValueError("a union of several non-null types has no Arrow column to write")
    value_at = others[0]
    inner = _encoder(schema, branches[value_at])
    null_tag = zigzag_varints(pa.array([null_at], pa.int64()))[0].as_py()
    value_tag = zigzag_varints(pa.array([value_at], pa.int64()))[0].as_py()

    def encode(values: pa.Array) -> pa.Array:
        count = len(values)
        valid = values.is_valid()
        nulls = values.null_count
        if nulls == 0:
            tags = pa.nulls(count, pa.binary()).fill_null(value_tag)
            return _join([tags, inner(values)], count)
        if nulls == count:
            return pa.nulls(count, pa.binary()).fill_null(null_tag)
        present = inner(values.filter(valid))
        body = pc.replace_with_mask(_empty(count), valid, present)
        tags = pc.if_else(
            valid, pa.scalar(value_tag, pa.binary()), pa.scalar(null_tag, pa.binary())
        )
        return _join([tags, body], count)

    return encode


def _blocks(item_encoders: list[Encode], parts: Callable[[pa.Array], list[pa.Array]]) -> Encode:
    """Arrays and maps: one block holding every item of the row, then the end (0)."""

    def encode(values: pa.Array) -> pa.Array:
        count = len(values)
        if pa.types.is_map(values.type):  # list kernels take a map as a list of entries
            entry = pa.struct([("key", values.type.key_type), ("value", values.type.item_type)])
            values = values.cast(pa.list_(entry))
        lengths = pc.list_value_length(values).fill_null(0)
        flat = pc.list_flatten(values)
        items = _join([e(p) for e, p in zip(item_encoders, parts(flat), strict=True)], len(flat))
        offsets = pa.concat_arrays(
            [pa.array([0], pa.int32()), pc.cumulative_sum(lengths.cast(pa.int32()))]
        )
        joined = pc.binary_join(pa.ListArray.from_arrays(offsets, items), b"")
        counts = pc.if_else(pc.greater(lengths, 0), zigzag_varints(lengths), b"")
        end = pa.nulls(count, pa.binary()).fill_null(b"\x00")
        return _join([counts, joined, end], count)

    return encode
