"""Record writers: decoded Arrow batches streamed into Parquet or Avro container files.
The plug point for output formats, chosen per topic by the ``format`` /
``per.topic.format`` keys (ingest/plugins.py).

A ``RecordWriter`` writes one output file: ``write(batch)`` as batches come,
``close()`` -> ``WriteResult(records, bytes)``. It owns its file name's ``extension``
and is built for a topic's decoder by ``for_decoder(file, decoder)``. Files are opened
through an ``open_file(path) -> binary file`` callable, so the filesystem layer (local,
HDFS) decides where bytes go; the writer closes the file.

``PartitionedWriters`` keeps one writer per output partition (an hour, a day, ...) of
one (topic, partition): one file per (partition, output partition) per run, as the
layout requires, so every output partition seen in a run stays open until the task
ends. Memory bound: the Parquet writer holds at most one row group (``row_group_size``
rows, default 20,000, ~5 MB of PageViewEvents) before writing it out, the Avro writer
one block (``sync_interval`` bytes of encoded rows, default 1 MiB); so a task holds about output
partitions x that, plus the chunk being decoded. A partition's range normally spans
a few hours.

Parquet: the decoder's Arrow schema (the value's columns then the metadata columns
of ingest/columns.py), snappy by default (zstd, gzip, none too), readable by Spark
SQL, Hive, Trino and pyarrow. Avro: the decoder's value schema with the metadata
columns' Avro fields appended to its top-level record
(``avro_schema_with_kafka_fields``), deflate by default (snappy, null too). Rows are
encoded to Avro a column at a time from Arrow (ingest/avro_encoder.py), never as one
Python object per record; fastavro writes the container around the encoded blocks.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Sequence
from typing import Any, BinaryIO, NamedTuple, Protocol

import pyarrow as pa
import pyarrow.parquet as pq
from fastavro.write import Writer as AvroContainerWriter

from ingest import columns as meta
from ingest.avro_encoder import compile_encoder
from ingest.decoders.arrow_types import arrow_schema_for, as_parsed
from ingest.decoders.base import Decoder
from ingest.partitioner import EventHourPartitioner, Partitioner, split_by
from schemas.canonical import ParsedSchema
from schemas.serde import parse_schema

__all__ = [
    "AvroRecordWriter",
    "CountingFile",
    "ParquetRecordWriter",
    "PartitionedWriters",
    "RecordWriter",
    "WriteResult",
    "arrow_schema_for",
    "avro_schema_with_kafka_fields",
]

OpenFile = Callable[[str], BinaryIO]


class WriteResult(NamedTuple):
    records: int
    bytes: int


class RecordWriter(Protocol):
    extension: str  # of the files it writes, without the dot

    @classmethod
    def for_decoder(cls, file: BinaryIO, decoder: Decoder) -> RecordWriter:
        """A writer of ``decoder``'s batches into ``file``."""
        ...

    def write(self, batch: pa.RecordBatch) -> None: ...

    def close(self) -> WriteResult: ...


class CountingFile:
    """A write-only file object that counts the bytes passing through it."""

    def __init__(self, file: BinaryIO) -> None:
        self.file = file
        self.bytes = 0
        self.closed = False

    def write(self, data: Any) -> int:
        size = memoryview(data).nbytes
        self.file.write(data)
        self.bytes += size
        return size

    def tell(self) -> int:
        return self.bytes

    def flush(self) -> None:
        self.file.flush()

    def writable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False

    def readable(self) -> bool:
        return False

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.file.close()


class ParquetRecordWriter:
    extension = "parquet"

    @classmethod
    def for_decoder(cls, file: BinaryIO, decoder: Decoder) -> ParquetRecordWriter:
        return cls(file, decoder.schema)

    def __init__(
        self,
        file: BinaryIO,
        schema: pa.Schema,
        *,
        compression: str = "snappy",
        row_group_size: int = 20_000,
    ) -> None:
        self.file = CountingFile(file)
        self.schema = schema
        self.row_group_size = row_group_size
        self._writer = pq.ParquetWriter(self.file, schema, compression=compression)
        self._pending: list[pa.RecordBatch] = []
        self._pending_rows = 0
        self.records = 0

    def write(self, batch: pa.RecordBatch) -> None:
        if batch.num_rows == 0:
            return
        if not batch.schema.equals(self.schema):
            batch = batch.select(self.schema.names).cast(self.schema)
        self._pending.append(batch)
        self._pending_rows += batch.num_rows
        self.records += batch.num_rows
        if self._pending_rows >= self.row_group_size:
            self._flush()

    def _flush(self) -> None:
        if self._pending:
            table = pa.Table.from_batches(self._pending, self.schema)
            self._writer.write_table(table, row_group_size=self.row_group_size)
            self._pending, self._pending_rows = [], 0

    def close(self) -> WriteResult:
        self._flush()
        self._writer.close()
        self.file.close()
        return WriteResult(self.records, self.file.bytes)


def avro_schema_with_kafka_fields(
    target: str | dict | ParsedSchema, metadata: Sequence[meta.Column] = meta.WITH_SCHEMA_ID
) -> dict:
    """The target schema (a record) with the metadata columns' Avro fields appended."""
    document = json.loads(as_parsed(target).text)
    names = {f["name"] for f in document["fields"]}
    clash = names & {c.name for c in metadata}
    if clash:
        raise ValueError(f"the target schema already has fields {sorted(clash)}")
    return {**document, "fields": [*document["fields"], *meta.avro_fields(metadata)]}


class AvroRecordWriter:
    extension = "avro"

    @classmethod
    def for_decoder(cls, file: BinaryIO, decoder: Decoder) -> AvroRecordWriter:
        return cls(file, decoder.value_schema, metadata=decoder.metadata)

    def __init__(
        self,
        file: BinaryIO,
        target: str | dict | ParsedSchema,
        *,
        metadata: Sequence[meta.Column] = meta.WITH_SCHEMA_ID,
        codec: str = "deflate",
        sync_interval: int = 1 << 20,
    ) -> None:
        self.file = CountingFile(file)
        self.avro_schema = avro_schema_with_kafka_fields(target, metadata)
        self.schema = arrow_schema_for(target, metadata)
        self._encode = compile_encoder(as_parsed(self.avro_schema))
        # fastavro writes the container: header, blocks compressed with ``codec``, syncs.
        self._writer = AvroContainerWriter(
            self.file, parse_schema(self.avro_schema), codec=codec, sync_interval=sync_interval
        )
        self.sync_interval = sync_interval
        self._pending: list[memoryview] = []
        self._pending_rows = 0
        self._pending_bytes = 0
        self.records = 0

    def write(self, batch: pa.RecordBatch) -> None:
        if batch.num_rows == 0:
            return
        if not batch.schema.equals(self.schema):
            batch = batch.select(self.schema.names).cast(self.schema)
        bodies = self._encode(pa.StructArray.from_arrays(batch.columns, fields=list(self.schema)))
        encoded = _value_view(bodies)  # keeps the Arrow buffer alive
        self._pending.append(encoded)
        self._pending_rows += len(bodies)
        self._pending_bytes += encoded.nbytes
        self.records += len(bodies)
        if self._pending_bytes >= self.sync_interval:
            self._flush()

    def _flush(self) -> None:
        """One container block of the pending rows: their bodies back to back."""
        if not self._pending_rows:
            return
        data = b"".join(self._pending)
        self._writer.write_block(_Block(self._pending_rows, io.BytesIO(data)))
        self._pending, self._pending_rows, self._pending_bytes = [], 0, 0

    def close(self) -> WriteResult:
        self._flush()
        self._writer.flush()
        self.file.close()
        return WriteResult(self.records, self.file.bytes)


class _Block(NamedTuple):
    """What fastavro's ``Writer.write_block`` reads of a block: its record count and
    its uncompressed bytes (it compresses them with the file's codec)."""

    num_records: int
    bytes_: io.BytesIO


def _value_view(binary: pa.Array) -> memoryview:
    """The value bytes of a binary array, back to back, without a copy."""
    offsets = pa.Array.from_buffers(
        pa.int32(), len(binary) + 1, [None, binary.buffers()[1]], offset=binary.offset
    )
    first, last = offsets[0].as_py(), offsets[len(binary)].as_py()
    return memoryview(binary.buffers()[2])[first:last]


class PartitionedWriters:
    """One writer per output partition of one (topic, partition), for the life of a task.

    ``path_for(key)`` names each output partition's file (the layout module decides),
    and ``make_writer(file)`` builds the writer for an opened file."""

    def __init__(
        self,
        open_file: OpenFile,
        path_for: Callable[[Any], str],
        make_writer: Callable[[BinaryIO], RecordWriter],
        partitioner: Partitioner | None = None,
    ) -> None:
        self.open_file = open_file
        self.path_for = path_for
        self.make_writer = make_writer
        self.partitioner = partitioner or EventHourPartitioner()
        self._open: dict[Any, tuple[str, RecordWriter]] = {}

    def write(self, batch: pa.RecordBatch) -> None:
        if batch.num_rows == 0:
            return
        for key, rows in split_by(self.partitioner, batch):
            entry = self._open.get(key)
            if entry is None:
                path = self.path_for(key)
                entry = self._open[key] = (path, self.make_writer(self.open_file(path)))
            entry[1].write(rows)

    def close(self) -> dict[Any, tuple[str, WriteResult]]:
        """Close every file: output partition -> (path, records, bytes)."""
        done = {}
        try:
            for key, (path, writer) in sorted(self._open.items()):
                done[key] = (path, writer.close())
        finally:
            self._open = {}
        return done
