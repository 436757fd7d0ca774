"""Avro values in the Confluent wire format (docs/contracts/avro.md).

A framed value is byte 0 = 0 (the magic byte), bytes 1-4 = the schema id as a
big-endian int32, then the Avro binary encoding of the value. Subjects are named
by topic: ``<topic>-value`` (or ``<topic>-key``), Confluent's TopicNameStrategy.

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
_HEADER = struct.Struct(">bI")

SubjectNameStrategy = Callable[[str, bool], str]


class SerializationError(ValueError):
    """A value could not be framed or unframed."""


def topic_subject(topic: str, is_key: bool = False) -> str:
    """TopicNameStrategy: ``<topic>-key`` or ``<topic>-value``."""
    return f"{topic}-{'key' if is_key else 'value'}"


def frame(schema_id: int, body: bytes) -> bytes:
    return _HEADER.pack(MAGIC_BYTE, schema_id) + body


def _schema_id_of(data: bytes) -> int:
    if data is None or len(data) < _HEADER.size:
        size = 0 if data is None else len(data)
        raise SerializationError(f"framed value too short: {size} bytes, need at least 5")
    magic, schema_id = _HEADER.unpack_from(data)
    if magic != MAGIC_BYTE:
        raise SerializationError(f"unknown magic byte {magic}, expected {MAGIC_BYTE}")
    return schema_id


def unframe(data: bytes) -> tuple[int, memoryview]:
    """The schema id and the Avro body of a framed value."""
    return _schema_id_of(data), memoryview(data)[_HEADER.size :]


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
        out.write(_HEADER.pack(MAGIC_BYTE, self.schema_id(topic)))
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
        body.seek(_HEADER.size)
        try:
            return fastavro.schemaless_reader(body, writer, reader)
        except (
            ValueError,
            TypeError,
            KeyError,
            EOFError,
            IndexError,
            SchemaResolutionError,
        ) as exc:
            raise SerializationError(f"cannot decode a value of schema {schema_id}: {exc}") from exc
