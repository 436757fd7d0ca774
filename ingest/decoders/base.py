"""The decoder plug point: what a decoder takes and gives back."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import islice
from typing import Protocol

import pyarrow as pa

from broker.records.batch import Record


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
    """Decodes fetched records of one topic into Arrow batches of ``schema``
    (the target value columns, then ``_kafka_partition``, ``_kafka_offset``,
    ``_kafka_timestamp``, ``_kafka_key``, ``_schema_id``)."""

    schema: pa.Schema

    def decode(self, partition: int, records: Sequence[Record]) -> DecodedChunk: ...

    def decode_stream(
        self, partition: int, records: Iterable[Record], chunk_size: int | None = None
    ) -> Iterator[DecodedChunk]: ...


def chunks(records: Iterable[Record], size: int) -> Iterator[list[Record]]:
    """Consecutive lists of at most ``size`` records: memory stays bounded by a chunk."""
    if size <= 0:
        raise ValueError("chunk size must be positive")
    it = iter(records)
    while chunk := list(islice(it, size)):
        yield chunk
