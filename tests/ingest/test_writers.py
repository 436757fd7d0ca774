"""Record writers: Parquet read back by pyarrow and by Spark SQL (local[1]), Avro
container files read back by fastavro, one file per hour, quarantine files."""

from __future__ import annotations

import base64
import datetime as dt
import json
import os
import random

import fastavro
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ingest.decoders import Quarantined, UnsupportedSchema, arrow_schema_for
from ingest.layout import Hour
from ingest.quarantine import QuarantineWriter, read_quarantine
from ingest.writers import (
    AvroRecordWriter,
    ParquetRecordWriter,
    PartitionedWriters,
    avro_schema_with_kafka_fields,
)
from schemas import catalog

TARGET = catalog.load_str("PageViewEvent.v3")
SCHEMA = arrow_schema_for(TARGET)
BASE_MS = 1_714_564_800_000  # 2024-05-01T12:00:00Z


def rows(count: int, seed: int = 2) -> list[dict]:
    """Decoded rows as plain values: times in epoch ms."""
    rng = random.Random(seed)
    return [
        {
            "header": {
                "time": BASE_MS + i * 997_000,  # ~17 minutes apart: several hours
                "host": f"web-{i % 7}",
                "service": "frontend",
                "event_id": f"{i:08d}-0000-4000-8000-000000000000",
            },
            "member_id": rng.randrange(-1, 2**40),
            "page_key": rng.choice(["feed", "jobs", "ünï"]),
            "page_url": "https://example.com/" + "p" * rng.randrange(50),
            "referrer": None if i % 2 else "https://ref.example.com/",
            "_kafka_partition": 4,
            "_kafka_offset": 1000 + i,
            "_kafka_timestamp": BASE_MS + i * 997_000 + 5,
            "_kafka_key": None if i % 3 else f"k{i}".encode(),
            "_schema_id": 1 + i % 2,
        }
        for i in range(count)
    ]


def to_batch(plain: list[dict]) -> pa.RecordBatch:
    def physical(t: pa.DataType) -> pa.DataType:
        if pa.types.is_timestamp(t):
            return pa.int64()
        if pa.types.is_struct(t):
            return pa.struct([pa.field(f.name, physical(f.type)) for f in t])
        return t

    plain_schema = pa.schema([pa.field(f.name, physical(f.type)) for f in SCHEMA])
    return pa.RecordBatch.from_pylist(plain, schema=plain_schema).cast(SCHEMA)


def hour_of(ms: int) -> Hour:
    t = dt.datetime.fromtimestamp(ms / 1000, dt.UTC)
    return Hour(t.strftime("%Y-%m-%d"), t.strftime("%H"))


def write_hours(tmp_path, make_writer, data: list[dict], suffix: str):
    def path_for(key: Hour) -> str:
        folder = tmp_path / f"dt={key.dt}" / f"hr={key.hr}"
        folder.mkdir(parents=True, exist_ok=True)
        return str(folder / f"page-views+4+1000+2000+run1.{suffix}")

    writers = PartitionedWriters(lambda path: open(path, "wb"), path_for, make_writer)
    for start in range(0, len(data), 37):  # many small batches, as chunks arrive
        writers.write(to_batch(data[start : start + 37]))
    return writers.close()


def test_parquet_files_per_hour_read_back_by_pyarrow(tmp_path):
    data = rows(300)
    done = write_hours(
        tmp_path,
        lambda f: ParquetRecordWriter(f, SCHEMA, compression="zstd", row_group_size=10),
        data,
        "parquet",
    )
    expected_hours = sorted({hour_of(r["header"]["time"]) for r in data})
    assert sorted(done) == expected_hours and len(done) > 20
    for key, (path, result) in done.items():
        want = [r for r in data if hour_of(r["header"]["time"]) == key]
        table = pq.read_table(path)
        assert table.schema.equals(SCHEMA)
        assert result.records == len(want) == table.num_rows
        assert result.bytes == os.path.getsize(path)
        assert table.equals(pa.Table.from_batches([to_batch(want)]))
        # row groups stay at row_group_size, not one per small batch
        meta = pq.ParquetFile(path).metadata
        assert meta.num_row_groups == -(-len(want) // 10)


def test_parquet_is_read_by_spark_sql_record_by_record(tmp_path, spark):
    data = rows(200)
    done = write_hours(tmp_path, lambda f: ParquetRecordWriter(f, SCHEMA), data, "parquet")
    assert len(done) > 1
    df = spark.read.option("basePath", str(tmp_path)).parquet(str(tmp_path))
    df.createOrReplaceTempView("pv")
    got = spark.sql(
        """SELECT dt, hr, unix_millis(header.time) AS t, header.host, header.service,
                  header.event_id, member_id, page_key, page_url, referrer,
                  _kafka_partition, _kafka_offset, unix_millis(_kafka_timestamp) AS kt,
                  _kafka_key, _schema_id
           FROM pv ORDER BY _kafka_offset"""
    ).collect()
    assert len(got) == len(data)
    for row, want in zip(got, data, strict=True):
        key = hour_of(want["header"]["time"])
        assert (str(row["dt"]), f"{int(row['hr']):02d}") == (key.dt, key.hr)
        h = want["header"]
        assert (row["t"], row["host"], row["service"], row["event_id"]) == (
            h["time"],
            h["host"],
            h["service"],
            h["event_id"],
        )
        assert (row["member_id"], row["page_key"], row["page_url"], row["referrer"]) == (
            want["member_id"],
            want["page_key"],
            want["page_url"],
            want["referrer"],
        )
        assert row["_kafka_partition"] == 4 and row["_kafka_offset"] == want["_kafka_offset"]
        assert row["kt"] == want["_kafka_timestamp"]
        assert (None if row["_kafka_key"] is None else bytes(row["_kafka_key"])) == want[
            "_kafka_key"
        ]
        assert row["_schema_id"] == want["_schema_id"]


def test_avro_container_files_read_back_by_fastavro(tmp_path):
    data = rows(150)
    for codec in ("deflate", "snappy", "null"):
        out = tmp_path / codec
        done = write_hours(
            out, lambda f, c=codec: AvroRecordWriter(f, TARGET, codec=c), data, "avro"
        )
        for key, (path, result) in done.items():
            want = [r for r in data if hour_of(r["header"]["time"]) == key]
            with open(path, "rb") as f:
                reader = fastavro.reader(f)
                assert reader.codec == codec
                got = list(reader)
            assert result.records == len(got) == len(want)
            assert result.bytes == os.path.getsize(path)
            for record, expected in zip(got, want, strict=True):
                as_ms = {
                    **record,
                    "header": {
                        **record["header"],
                        "time": int(record["header"]["time"].timestamp() * 1000),
                        "event_id": str(record["header"]["event_id"]),  # uuid logical type
                    },
                    "_kafka_timestamp": int(record["_kafka_timestamp"].timestamp() * 1000),
                }
                assert as_ms == expected


def test_avro_output_schema_is_the_target_plus_kafka_fields():
    schema = avro_schema_with_kafka_fields(TARGET)
    names = [f["name"] for f in schema["fields"]]
    assert names[:5] == ["header", "member_id", "page_key", "page_url", "referrer"]
    assert names[5:] == [f.name for f in SCHEMA][5:]
    # and maps onto the same Arrow schema as the decoded batches
    assert arrow_schema_for(json.dumps(schema), metadata=()) == SCHEMA


def test_arrow_schema_for_every_avro_type():
    schema = {
        "type": "record",
        "name": "All",
        "fields": [
            {"name": "b", "type": "boolean"},
            {"name": "i", "type": "int"},
            {"name": "l", "type": "long"},
            {"name": "f", "type": "float"},
            {"name": "d", "type": "double"},
            {"name": "s", "type": "string"},
            {"name": "y", "type": "bytes"},
            {"name": "n", "type": "null"},
            {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A"]}},
            {"name": "x", "type": {"type": "fixed", "name": "X", "size": 16}},
            {"name": "a", "type": {"type": "array", "items": "int"}},
            {"name": "m", "type": {"type": "map", "values": ["null", "string"]}},
            {"name": "o", "type": ["null", "E"]},
            {"name": "u", "type": {"type": "string", "logicalType": "uuid"}},
            {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
            {"name": "tu", "type": {"type": "long", "logicalType": "timestamp-micros"}},
            {"name": "lt", "type": {"type": "long", "logicalType": "local-timestamp-millis"}},
            {"name": "dd", "type": {"type": "int", "logicalType": "date"}},
            {"name": "tm", "type": {"type": "int", "logicalType": "time-millis"}},
            {
                "name": "dec",
                "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2},
            },
            {
                "name": "r",
                "type": {"type": "record", "name": "R", "fields": [{"name": "z", "type": "X"}]},
            },
        ],
    }
    got = arrow_schema_for(schema, metadata=())
    assert [(f.name, f.type) for f in got] == [
        ("b", pa.bool_()),
        ("i", pa.int32()),
        ("l", pa.int64()),
        ("f", pa.float32()),
        ("d", pa.float64()),
        ("s", pa.string()),
        ("y", pa.binary()),
        ("n", pa.null()),
        ("e", pa.string()),
        ("x", pa.binary(16)),
        ("a", pa.list_(pa.int32())),
        ("m", pa.map_(pa.string(), pa.string())),
        ("o", pa.string()),
        ("u", pa.string()),
        ("ts", pa.timestamp("ms", tz="UTC")),
        ("tu", pa.timestamp("us", tz="UTC")),
        ("lt", pa.timestamp("ms")),
        ("dd", pa.date32()),
        ("tm", pa.time32("ms")),
        ("dec", pa.decimal128(10, 2)),
        ("r", pa.struct([("z", pa.binary(16))])),
    ]
    assert all(f.nullable for f in got)
    with pytest.raises(UnsupportedSchema, match="several non-null"):
        arrow_schema_for(
            {"type": "record", "name": "U", "fields": [{"name": "v", "type": ["int", "string"]}]}
        )


def test_quarantine_file_round_trip(tmp_path):
    records = [
        Quarantined(10, None, None, "null value"),
        Quarantined(11, b"\x00key", b"\x01\xff\x00", "not Confluent framing: magic byte 1", None),
        Quarantined(12, b"", b"\x00\x00\x00\x00\x63", "unknown schema id 99", 99),
    ]
    path = tmp_path / "errors" / "page-views+4+run1.jsonl"
    path.parent.mkdir()
    writer = QuarantineWriter.open(lambda p: open(p, "wb"), str(path), "page-views", 4)
    writer.write(records[:1])
    writer.write(records[1:])
    writer.write([])
    result = writer.close()
    assert result.records == 3 and result.bytes == path.stat().st_size
    lines = path.read_bytes().splitlines()
    assert json.loads(lines[1])["value"] == base64.b64encode(b"\x01\xff\x00").decode()
    assert json.loads(lines[1])["reason"].startswith("not Confluent framing")
    assert list(read_quarantine(lines)) == [("page-views", 4, r) for r in records]
