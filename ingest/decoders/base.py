"""The decoder plug point: what a decoder takes and gives back. Decoders are chosen per
topic by the ``decoder`` / ``per.topic.decoder`` keys (ingest/plugins.py)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import islice
from typing import Protocol

import pyarrow as pa

from broker.records.batch import Record
from broker.records.columnar import RecordColumns
from ingest.columns import Column
from schemas.canonical import ParsedSchema


@dataclass(frozen=True)
class Quarantined:
    """A record that could not be decoded, kept raw with the reason."""

    offset: int
    key: bytes | None
    value: bytes | None
    reason: str
    schema_id: int | None = None  # from the frame, when there is one


@dataclass
class DecodedChunk:
    """One chunk of a partition's records: the decoded rows and the rest.

    ``batch.num_rows + len(quarantined)`` is the number of records given."""

    partition: int
    batch: pa.RecordBatch
    quarantined: list[Quarantined] = field(default_factory=list)

    @property
    def count(self) -> int:
        return self.batch.num_rows + len(self.quarantined)


class Decoder(Protocol):
    """Decodes fetched records of one topic into Arrow batches of ``schema``: the
    fields of ``value_schema`` (an Avro record: the Avro writer writes it, with the
    metadata columns' Avro types appended), then the ``metadata`` columns
    (ingest/columns.py), in that order.

    ``decode`` takes the records of one partition as columns (``RecordColumns``: offset,
    timestamp, key and value arrays, as a load task fetches them); tests and tools
    holding ``Record`` objects may pass those (``as_columns`` converts them).
    Every record given to ``decode`` comes back either as a row of the batch (in
    offset order) or quarantined with its reason, never dropped: ``len(records) ==
    batch.num_rows + len(quarantined)``. Problems that are not the record's fault (a
    registry outage) raise, so the task fails and is retried."""

    schema: pa.Schema
    value_schema: ParsedSchema
    metadata: tuple[Column, ...]

    def decode(self, partition: int, records: RecordColumns | Sequence[Record]) -> DecodedChunk: ...


def as_columns(records: RecordColumns | Sequence[Record]) -> RecordColumns:
    """What decoders read: the columns a load task fetched, or records held as objects."""
    if isinstance(records, RecordColumns):
        return records
    return RecordColumns.from_records(records)


def decode_stream(
    decoder: Decoder, partition: int, records: Iterable[Record], chunk_size: int
) -> Iterator[DecodedChunk]:
    """Decode in chunks of at most ``chunk_size`` records: memory stays bounded by one."""
    for chunk in chunks(records, chunk_size):
        yield decoder.decode(partition, chunk)


def chunks(records: Iterable[Record], size: int) -> Iterator[list[Record]]:
    """Consecutive lists of at most ``size`` records: memory stays bounded by a chunk."""
    if size <= 0:
        raise ValueError("chunk size must be positive")
    it = iter(records)
    while chunk := list(islice(it, size)):
        yield chunk
