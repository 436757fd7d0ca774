"""Avro values in the Confluent wire format (docs/contracts/avro.md).

A framed value is byte 0 = 0 (the magic byte), bytes 1-4 = the schema id as a
big-endian int32, then the Avro binary encoding of the value. Subjects are named
by topic: ``<topic>-value`` (or ``<topic>-key``), Confluent's TopicNameStrategy.

This module is the one home of that framing: ``frame`` / ``unframe`` /
``frame_problem`` / ``frame_schema_id`` for one value, ``frame_columns`` for a
whole chunk of values at once (the load's decoder), and ``UNDECODABLE``, the
fastavro exceptions that mean "these bytes are not a value of the schema".

The deserializer reads with the writer's schema (found by the id in the frame)
and can project onto a reader schema, either one given or the latest version of
the topic's subject, so data written by several schema versions reads as one
shape (Avro schema resolution, done by fastavro).
"""

from __future__ import annotations

import io
import json
import struct
import threading
from collections.abc import Callable
from typing import Any

import fastavro
from fastavro.read import SchemaResolutionError

from schemas.client import RegistryClient

MAGIC_BYTE = 0
# Confluent's serializers write the id with Java's putInt: a signed big-endian int32.
_HEADER = struct.Struct(">bi")
FRAME_SIZE = _HEADER.size  # 5

# What fastavro raises when the bytes are not a value of the writer schema, or the
# value has no place in the reader schema. Found by decoding truncated bodies, random
# garbage, flipped bytes and bodies read with another schema (tests/schemas/
# test_avro_serde.py): truncation gives EOFError; a varint or length running off
# the end, or an enum or union index out of range, IndexError; bad UTF-8
# (UnicodeDecodeError), a malformed uuid and other logical-type conversions,
# ValueError; a timestamp or date beyond Python's datetime range, OverflowError; a
# writer value the reader cannot take (enum symbol, type mismatch),
# SchemaResolutionError. TypeError and KeyError are deliberately not here: no bytes
# produce them, only a bug in how fastavro is called does, and a bug must fail the
# task rather than quarantine a partition's data as "undecodable".
UNDECODABLE = (EOFError, IndexError, ValueError, OverflowError, SchemaResolutionError)

SubjectNameStrategy = Callable[[str, bool], str]


class SerializationError(ValueError):
    """A value could not be framed or unframed."""


def topic_subject(topic: str, is_key: bool = False) -> str:
    """TopicNameStrategy: ``<topic>-key`` or ``<topic>-value``."""
    return f"{topic}-{'key' if is_key else 'value'}"


def frame(schema_id: int, body: bytes) -> bytes:
    return _HEADER.pack(MAGIC_BYTE, schema_id) + body


def frame_problem(data: bytes | None) -> str | None:
    """Why ``data`` is not a Confluent-framed value, or None when it is one."""
    if data is None or len(data) < FRAME_SIZE:
        size = 0 if data is None else len(data)
        return f"not Confluent framing: {size} bytes, need at least {FRAME_SIZE}"
    if data[0] != MAGIC_BYTE:
        return f"not Confluent framing: magic byte {data[0]}, expected {MAGIC_BYTE}"
    return None


def frame_schema_id(data: bytes | None) -> int | None:
    """The schema id of a framed value, None when ``data`` is not framed."""
    if frame_problem(data) is not None:
        return None
    return _HEADER.unpack_from(data)[1]


def _schema_id_of(data: bytes) -> int:
    problem = frame_problem(data)
    if problem is not None:
        raise SerializationError(problem)
    return _HEADER.unpack_from(data)[1]


def unframe(data: bytes) -> tuple[int, memoryview]:
    """The schema id and the Avro body of a framed value."""
    return _schema_id_of(data), memoryview(data)[FRAME_SIZE:]


def frame_columns(data, starts, ends):
    """The frames of a chunk of values at once, in Arrow: ``data`` is the values packed
    into one uint8 array, value i at ``[starts[i], ends[i])`` with at least
    ``FRAME_SIZE`` bytes of padding after the last (see ingest/decoders/columnar.py's
    ``pack``). Returns (the schema id of each value as int64, null where the value is
    not framed; a boolean mask of the values that are not framed, whose reason
    ``frame_problem`` gives)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    short = pc.less(pc.subtract(ends, starts), FRAME_SIZE)
    magic = data.take(starts)
    word = pa.scalar(0, pa.int64())
    for k in range(1, FRAME_SIZE):
        byte = data.take(pc.add(starts, k)).cast(pa.int64())
        word = pc.add(pc.multiply(word, 256), byte)
    # Big-endian int32, signed as _HEADER reads it.
    ids = pc.if_else(pc.greater_equal(word, 1 << 31), pc.subtract(word, 1 << 32), word)
    unframed = pc.or_(short, pc.not_equal(magic, MAGIC_BYTE))
    if pc.any(unframed).as_py():
        ids = pc.if_else(unframed, pa.scalar(None, pa.int64()), ids)
    return ids, unframed


def parse_schema(schema: str | dict) -> Any:
    """A fastavro-parsed schema, with its own named-type table (never fastavro's global one)."""
    document = json.loads(schema) if isinstance(schema, str) else schema
    return fastavro.parse_schema(document, named_schemas={})


class AvroSerializer:
    """Frames values written with one schema; registers it (or looks it up) per subject."""

    def __init__(
        self,
        client: RegistryClient,
        schema: str | dict,
        *,
        is_key: bool = False,
        auto_register: bool = True,
        subject_name_strategy: SubjectNameStrategy = topic_subject,
    ) -> None:
        self.client = client
        self.schema_text = schema if isinstance(schema, str) else json.dumps(schema)
        self.parsed = parse_schema(self.schema_text)
        self.is_key = is_key
        self.auto_register = auto_register
        self.subject_name_strategy = subject_name_strategy
        self._ids: dict[str, int] = {}

    def schema_id(self, topic: str) -> int:
        subject = self.subject_name_strategy(topic, self.is_key)
        found = self._ids.get(subject)
        if found is None:
            if self.auto_register:
                found = self.client.register(subject, self.schema_text)
            else:
                found = self.client.lookup(subject, self.schema_text).id
            self._ids[subject] = found
        return found

    def __call__(self, value: Any, topic: str) -> bytes:
        out = io.BytesIO()
        out.write(frame(self.schema_id(topic), b""))
        try:
            fastavro.schemaless_writer(out, self.parsed, value)
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise SerializationError(f"value does not match the schema: {exc}") from exc
        return out.getvalue()


class AvroDeserializer:
    """Unframes values; optionally projects them onto a reader schema.

    ``reader_schema`` fixes the shape; ``use_latest=True`` reads every value as
    the latest version of the topic's subject instead; with neither, values come
    back as their writer schema made them.
    """

    def __init__(
        self,
        client: RegistryClient,
        *,
        reader_schema: str | dict | None = None,
        use_latest: bool = False,
        is_key: bool = False,
        subject_name_strategy: SubjectNameStrategy = topic_subject,
    ) -> None:
        if reader_schema is not None and use_latest:
            raise ValueError("give reader_schema or use_latest, not both")
        self.client = client
        self.reader = None if reader_schema is None else parse_schema(reader_schema)
        self.use_latest = use_latest
        self.is_key = is_key
        self.subject_name_strategy = subject_name_strategy
        self._writers: dict[int, Any] = {}
        self._lock = threading.Lock()

    def _writer(self, schema_id: int) -> Any:
        parsed = self._writers.get(schema_id)
        if parsed is None:
            parsed = parse_schema(self.client.schema(schema_id))
            with self._lock:
                self._writers[schema_id] = parsed
        return parsed

    def _reader(self, schema_id: int, topic: str | None) -> Any:
        if not self.use_latest:
            return self.reader
        if topic is None:
            raise ValueError("use_latest needs the topic to name the subject")
        latest = self.client.latest(self.subject_name_strategy(topic, self.is_key))
        if latest.id == schema_id:
            return None  # written with the latest schema: no projection needed
        return self._writer(latest.id)

    def __call__(self, data: bytes, topic: str | None = None) -> Any:
        schema_id = _schema_id_of(data)
        writer = self._writer(schema_id)
        reader = self._reader(schema_id, topic)
        # Seeking past the header is cheaper than wrapping a sliced memoryview.
        body = io.BytesIO(data)
        body.seek(FRAME_SIZE)
        try:
            return fastavro.schemaless_reader(body, writer, reader)
        except UNDECODABLE as exc:
            raise SerializationError(f"cannot decode a value of schema {schema_id}: {exc}") from exc
