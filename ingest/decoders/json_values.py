"""Decoding JSON values of one topic into Arrow batches of its registered schema.

For topics whose producers write plain JSON objects (UTF-8, one object per record)
instead of Confluent-framed Avro. The target is the same as for Avro topics: the latest
schema of ``<topic>-value`` in the registry (an Avro record), so the columns, types and
event-time field are declared once, in the registry, whatever the encoding; ``_schema_id``
is that schema's id.

An object is read as plain JSON, as most producers write it (not Avro's JSON encoding,
which wraps union values in ``{"type": value}``): a field missing from the object takes
the schema's default, and is an error without one; fields the schema lacks are ignored;
a union field takes a value of any of its branches; timestamps, dates and times are
numbers in their logical type's unit (``timestamp-millis``: ms since the epoch), a uuid
is a string. Bytes, fixed and decimal fields have no JSON form here: values giving them
are quarantined.

Each object is checked against the schema (fastavro's validation: types and ranges
exactly, no silent truncation of 1.5 to 1) and encoded as Avro, then the chunk is
decoded by the Avro decoder, so JSON and Avro topics give the same Arrow shapes.
Quarantine reasons: ``null value``, ``not UTF-8: ...``, ``not JSON: ...``, ``not a JSON
object: ...``, ``does not match schema N: ...``. The raw bytes are kept as sent.
"""

from __future__ import annotations

import io
import json
from collections.abc import Sequence

import fastavro
import pyarrow as pa
from fastavro.validation import ValidationError, validate

from broker.records.batch import Record
from broker.records.columnar import RecordColumns
from ingest import columns as meta
from ingest.decoders.arrow_types import as_parsed
from ingest.decoders.base import DecodedChunk, Quarantined, as_columns
from ingest.decoders.confluent import ConfluentAvroDecoder
from ingest.decoders.rowwise import without_logical_types
from schemas.client import RegistryClient
from schemas.serde import frame, parse_schema, topic_subject


class JsonDecoder:
    metadata = meta.WITH_SCHEMA_ID

    def __init__(self, registry: RegistryClient, topic: str) -> None:
        latest = registry.latest(topic_subject(topic))
        self.schema_id = latest.id
        self.value_schema = as_parsed(latest.schema)
        # Logical types off: JSON gives their underlying numbers and strings.
        self._plain = parse_schema(without_logical_types(json.loads(self.value_schema.text)))
        self._avro = ConfluentAvroDecoder(registry, topic, self.value_schema)
        self.schema = self._avro.schema

    def _encode(self, value: bytes | None) -> tuple[bytes | None, str | None]:
        """The value as a framed Avro body, or the reason it has none."""
        if value is None:
            return None, "null value"
        try:
            text = bytes(value).decode("utf-8")
        except UnicodeDecodeError as exc:
            return None, f"not UTF-8: {exc}"
        try:
            document = json.loads(text)
        except ValueError as exc:
            return None, f"not JSON: {exc}"
        except RecursionError:
            return None, "not JSON: nested too deeply"
        if not isinstance(document, dict):
            return None, f"not a JSON object: a {type(document).__name__}"
        try:
            validate(document, self._plain, raise_errors=True)
        except ValidationError as exc:
            problems = "; ".join(str(e) for e in exc.errors) if exc.errors else str(exc)
            return None, f"does not match schema {self.schema_id}: {problems}"
        out = io.BytesIO()
        out.write(frame(self.schema_id, b""))
        fastavro.schemaless_writer(out, self._plain, document)
        return out.getvalue(), None

    def decode(self, partition: int, records: RecordColumns | Sequence[Record]) -> DecodedChunk:
        records = as_columns(records)
        sent = records.value.to_pylist()
        encoded: list[bytes] = []
        kept: list[int] = []
        quarantined: list[Quarantined] = []
        for i, value in enumerate(sent):
            body, reason = self._encode(value)
            if reason is None:
                encoded.append(body)
                kept.append(i)
            else:
                offset, key = records.offset[i].as_py(), records.key[i].as_py()
                quarantined.append(Quarantined(offset, key, value, reason))
        good = records.take(pa.array(kept, pa.int64())).with_values(pa.array(encoded, pa.binary()))
        chunk = self._avro.decode(partition, good)
        if chunk.quarantined:  # valid JSON the Avro pass refused: keep the bytes as sent
            by_offset = dict(zip(records.offset.to_pylist(), sent, strict=True))
            quarantined += [
                Quarantined(q.offset, q.key, by_offset[q.offset], q.reason)
                for q in chunk.quarantined
            ]
            quarantined.sort(key=lambda q: q.offset)
        return DecodedChunk(partition, chunk.batch, quarantined)
