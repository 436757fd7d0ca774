"""Arrow types for Avro schemas: the one mapping every decoder and writer uses.

Avro → Arrow:

* record → struct; union of null and one type → that type (nullable);
  a bare ``null`` → null;
* boolean, int, long, float, double → bool, int32, int64, float32, float64;
  string → string; bytes → binary; fixed → fixed_size_binary(size);
* enum → string (the symbol): Spark, Hive and Trino all read it as a string;
* array → list, map → map<string, value>;
* logical types: timestamp-millis / -micros → timestamp(ms / us, UTC);
  local-timestamp-millis / -micros → timestamp without a zone; date → date32;
  time-millis → time32(ms); time-micros → time64(us); uuid → string;
  decimal → decimal128 (decimal256 above precision 38).

Every Arrow field is nullable: Avro's non-null rule is enforced by decoding, and
keeping Arrow fields nullable lets a null parent (a null nested record) carry
children without a special case in Parquet.

Unions of several non-null types have no Arrow shape that Spark SQL reads from
Parquet, so a target schema containing one is refused (``UnsupportedSchema``).

``physical=True`` gives the type before logical types are applied (what fastavro
returns with logical types switched off: int64 for a timestamp, int32 for a
date): the row decoder builds that and casts it to the logical type in one step.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from ingest import columns as meta
from schemas.canonical import ParsedSchema, kind, parse

_PRIMITIVE = {
    "null": pa.null(),
    "boolean": pa.bool_(),
    "int": pa.int32(),
    "long": pa.int64(),
    "float": pa.float32(),
    "double": pa.float64(),
    "bytes": pa.binary(),
    "string": pa.string(),
}

_LOGICAL = {
    ("long", "timestamp-millis"): pa.timestamp("ms", tz="UTC"),
    ("long", "timestamp-micros"): pa.timestamp("us", tz="UTC"),
    ("long", "local-timestamp-millis"): pa.timestamp("ms"),
    ("long", "local-timestamp-micros"): pa.timestamp("us"),
    ("int", "date"): pa.date32(),
    ("int", "time-millis"): pa.time32("ms"),
    ("long", "time-micros"): pa.time64("us"),
    ("string", "uuid"): pa.string(),
}


class UnsupportedSchema(ValueError):
    """The schema has a shape with no Arrow/Parquet equivalent here."""


def as_parsed(schema: str | dict | ParsedSchema) -> ParsedSchema:
    if isinstance(schema, ParsedSchema):
        return schema
    return parse(schema if isinstance(schema, str) else json.dumps(schema))


def arrow_schema_for(
    schema: str | dict | ParsedSchema, metadata: Sequence[meta.Column] = meta.WITH_SCHEMA_ID
) -> pa.Schema:
    """The Arrow schema of a decoded batch of ``schema`` (a record): its fields, then
    the ``metadata`` columns (ingest/columns.py; ``()`` for none)."""
    parsed = as_parsed(schema)
    struct = arrow_type(parsed, parsed.tree)
    if not pa.types.is_struct(struct):
        raise UnsupportedSchema("the top-level schema must be a record")
    clash = {f.name for f in struct} & {c.name for c in metadata}
    if clash:
        raise UnsupportedSchema(f"the schema already has fields {sorted(clash)}")
    return pa.schema(list(struct) + meta.arrow_fields(metadata))


def logical_type(schema: ParsedSchema, node: Any) -> pa.DataType | None:
    """The Arrow type a logical type maps to, or None for a plain (or unknown) one."""
    node = schema.resolve(node)
    if not isinstance(node, dict):
        return None
    logical = node.get("logicalType")
    if logical is None:
        return None
    base = node["type"]
    if logical == "decimal" and base in ("bytes", "fixed"):
        precision, scale = node.get("precision"), node.get("scale", 0)
        if isinstance(precision, int) and isinstance(scale, int) and 0 < precision:
            if scale > precision:
                return None
            return (pa.decimal128 if precision <= 38 else pa.decimal256)(precision, scale)
        return None
    # Unknown logical types fall back to the underlying type, as the spec says.
    return _LOGICAL.get((base, logical))


def nullable_branch(schema: ParsedSchema, branches: list) -> Any | None:
    """The one non-null branch of a union, None for a union of null alone;
    raises UnsupportedSchema for several non-null branches."""
    others = [b for b in branches if kind(schema, b) != "null"]
    if len(others) > 1:
        raise UnsupportedSchema(
            f"a union of several non-null types ({len(others)}) has no Arrow/Parquet shape"
        )
    return others[0] if others else None


def arrow_type(
    schema: ParsedSchema, node: Any, *, physical: bool = False, _inside: frozenset = frozenset()
) -> pa.DataType:
    node = schema.resolve(node)
    what = kind(schema, node)
    if not physical or what in ("bytes", "fixed"):
        # decimals stay logical in the row decoder too (fastavro gives Decimal).
        logical = logical_type(schema, node)
        if logical is not None and (not physical or pa.types.is_decimal(logical)):
            return logical
    if what in _PRIMITIVE:
        return _PRIMITIVE[what]
    if what == "record":
        if node["name"] in _inside:
            raise UnsupportedSchema(f"recursive record {node['name']} has no Arrow shape")
        inside = _inside | {node["name"]}
        return pa.struct(
            [
                pa.field(
                    f["name"], arrow_type(schema, f["type"], physical=physical, _inside=inside)
                )
                for f in node["fields"]
            ]
        )
    if what == "enum":
        return pa.string()
    if what == "fixed":
        return pa.binary(node["size"])
    if what == "array":
        return pa.list_(arrow_type(schema, node["items"], physical=physical, _inside=_inside))
    if what == "map":
        values = arrow_type(schema, node["values"], physical=physical, _inside=_inside)
        return pa.map_(pa.string(), values)
    if what == "union":
        branch = nullable_branch(schema, node)
        if branch is None:
            return pa.null()
        return arrow_type(schema, branch, physical=physical, _inside=_inside)
    raise UnsupportedSchema(f"unknown Avro type {what!r}")
