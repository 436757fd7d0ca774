"""The metadata columns the load appends to every row, declared once: name, Arrow type
and Avro type. Decoders build them, writers write them (Parquet from the Arrow types,
Avro from the Avro ones), the partitioner and the task read them by name.

Every decoder gives the Kafka columns (``KAFKA``); decoders that read values through
the schema registry add ``_schema_id`` (``WITH_SCHEMA_ID``), the id of the schema the
value was written with. They come after the value's own columns, in this order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from broker.records.columnar import RecordColumns


@dataclass(frozen=True)
class Column:
    name: str
    arrow: pa.DataType
    avro: Any  # the Avro type, as in a schema's JSON
    doc: str
    avro_default: Any = ...  # ... = no default in the Avro field

    def avro_field(self) -> dict:
        field = {"name": self.name, "type": self.avro}
        if self.avro_default is not ...:
            field["default"] = self.avro_default
        return field


PARTITION = Column("_kafka_partition", pa.int32(), "int", "the record's partition")
OFFSET = Column("_kafka_offset", pa.int64(), "long", "the record's offset")
TIMESTAMP = Column(
    "_kafka_timestamp",
    pa.timestamp("ms", tz="UTC"),
    {"type": "long", "logicalType": "timestamp-millis"},
    "the record's Kafka timestamp (the producer's CreateTime); audit windows follow it",
)
KEY = Column("_kafka_key", pa.binary(), ["null", "bytes"], "the record's key", None)
SCHEMA_ID = Column(
    "_schema_id", pa.int32(), "int", "the registry id of the schema the value was written with"
)

KAFKA = (PARTITION, OFFSET, TIMESTAMP, KEY)
WITH_SCHEMA_ID = (*KAFKA, SCHEMA_ID)
ALL = WITH_SCHEMA_ID  # every metadata name a value's own fields must not take


def arrow_fields(columns: Sequence[Column]) -> list[pa.Field]:
    return [pa.field(c.name, c.arrow) for c in columns]


def avro_fields(columns: Sequence[Column]) -> list[dict]:
    return [c.avro_field() for c in columns]


def with_metadata(
    schema: pa.Schema,
    values: pa.StructArray,
    partition: int,
    records: RecordColumns,
    rows: pa.Array | None = None,
    schema_ids: pa.Array | None = None,
) -> pa.RecordBatch:
    """A batch of ``schema`` (the value's fields, then metadata columns): the value
    columns of ``values`` and the metadata of the records they came from, which are
    the rows ``rows`` of ``records`` (all of them, in order, when ``rows`` is None).
    ``schema_ids`` (one per record) fills ``_schema_id`` when the schema has it."""
    count = len(values)
    if count == 0:
        return pa.RecordBatch.from_pylist([], schema=schema)
    every = rows is None or count == len(records)
    per_record = {
        OFFSET.name: lambda: records.offset,
        TIMESTAMP.name: lambda: records.timestamp.cast(TIMESTAMP.arrow),
        KEY.name: lambda: records.key,
        SCHEMA_ID.name: lambda: schema_ids.cast(SCHEMA_ID.arrow),
    }
    metadata = []
    for field in schema:
        if field.name == PARTITION.name:
            metadata.append(pa.nulls(count, PARTITION.arrow).fill_null(partition))
        elif field.name in per_record:
            column = per_record[field.name]()
            metadata.append(column if every else column.take(rows))
    return pa.RecordBatch.from_arrays([*values.flatten(), *metadata], schema=schema)
