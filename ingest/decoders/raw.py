"""Raw values: every record's value bytes as they are, in one ``value`` column.

For topics with no schema (logs, opaque payloads): nothing is parsed, so nothing is
quarantined, and a null value (a tombstone) is a null ``value``. There is no schema id
(the metadata columns are the Kafka ones only) and no event-time field: an event-time
partitioner places rows by their Kafka timestamp.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa

from broker.records.batch import Record
from broker.records.columnar import RecordColumns
from ingest import columns as meta
from ingest.decoders.arrow_types import arrow_schema_for, as_parsed
from ingest.decoders.base import DecodedChunk, as_columns

RAW_VALUE = {
    "type": "record",
    "name": "RawValue",
    "namespace": "kafka_hourly",
    "fields": [{"name": "value", "type": ["null", "bytes"], "default": None}],
}


class RawDecoder:
    metadata = meta.KAFKA

    def __init__(self) -> None:
        self.value_schema = as_parsed(RAW_VALUE)
        self.schema = arrow_schema_for(self.value_schema, self.metadata)

    def decode(self, partition: int, records: RecordColumns | Sequence[Record]) -> DecodedChunk:
        records = as_columns(records)
        struct = pa.StructArray.from_arrays([records.value], names=["value"])
        return DecodedChunk(partition, meta.with_metadata(self.schema, struct, partition, records))
