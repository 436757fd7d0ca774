"""Row-at-a-time Avro decoding with fastavro: the reference path.

Used for writer schemas the columnar decoder does not read (recursive records,
a decimal read as another type) and to name the reason a row is bad. Logical types other than decimal are switched
off in the schemas handed to fastavro (their encoding is the underlying type's),
so it returns plain ints and strings instead of datetime and UUID objects; the
Arrow cast to the logical type happens once per column afterwards.
"""

from __future__ import annotations

import io
import json
from typing import Any

import fastavro
import pyarrow as pa

from ingest.decoders.arrow_types import arrow_type
from schemas.canonical import ParsedSchema
from schemas.serde import UNDECODABLE, parse_schema


class BadRow(ValueError):
    """A value that cannot be decoded; the message is the quarantine reason."""


def without_logical_types(node: Any) -> Any:
    if isinstance(node, list):
        return [without_logical_types(n) for n in node]
    if not isinstance(node, dict):
        return node
    plain = {k: without_logical_types(v) for k, v in node.items()}
    if plain.get("logicalType") not in (None, "decimal"):
        del plain["logicalType"]
    return plain


def _fastavro_schema(schema: ParsedSchema) -> Any:
    return parse_schema(without_logical_types(json.loads(schema.text)))


class RowDecoder:
    """Reads values written with ``writer`` as ``reader`` (Avro schema resolution)."""

    def __init__(self, writer: ParsedSchema, reader: ParsedSchema) -> None:
        self.writer = _fastavro_schema(writer)
        self.reader = None if writer.canonical == reader.canonical else _fastavro_schema(reader)
        self.physical = arrow_type(reader, reader.tree, physical=True)
        self.out_type = arrow_type(reader, reader.tree)

    def read(self, value: bytes, skip: int = 0) -> dict:
        body = io.BytesIO(value)
        body.seek(skip)
        try:
            record = fastavro.schemaless_reader(body, self.writer, self.reader)
        except UNDECODABLE as exc:
            raise BadRow(f"undecodable body: {type(exc).__name__}: {exc}") from None
        left = len(value) - body.tell()
        if left:
            raise BadRow(f"undecodable body: {left} bytes left after the value")
        return record

    def to_arrow(self, records: list[dict]) -> pa.StructArray:
        return pa.array(records, type=self.physical).cast(self.out_type)

    def to_arrow_checked(self, records: list[dict]) -> tuple[pa.StructArray, dict[int, str]]:
        """``to_arrow`` of the records that fit their Arrow types, and a reason for each
        that does not (by position): fastavro reads an Avro int of any width and a
        decimal of any precision, which only corrupt data holds."""
        try:
            return self.to_arrow(records), {}
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
            pass
        kept, reasons = [], {}
        for i, record in enumerate(records):
            try:
                self.to_arrow([record])
            except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError) as exc:
                reasons[i] = f"undecodable body: a value out of its type's range: {exc}"
                continue
            kept.append(record)
        return self.to_arrow(kept), reasons
