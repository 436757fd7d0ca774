"""Committed loads of small files, written by the load's own record writers, for the
compaction tests and benchmark: rows with their `_kafka_*` columns, one file per
(task range, hour), each run committed through ingest.commit with `_SUCCESS` beside."""

from __future__ import annotations

import io
import json

import fastavro
import pyarrow as pa
import pyarrow.parquet as pq

from ingest import columns, layout
from ingest.commit import commit
from ingest.manifest import DataFile, Manifest, PartitionLedger
from ingest.writers import AvroRecordWriter, ParquetRecordWriter, arrow_schema_for

TOPIC = "clicks"
VALUE_SCHEMA = {
    "type": "record",
    "name": "Click",
    "fields": [{"name": "page", "type": "string"}, {"name": "n", "type": "long"}],
}
SCHEMA = arrow_schema_for(VALUE_SCHEMA, columns.WITH_SCHEMA_ID)


def run_id(i: int) -> str:
    return f"20261122T{i // 3600 % 24:02d}{i // 60 % 60:02d}{i % 60:02d}.000Z-{i:08x}"


def batch(
    partition: int, first: int, next_: int, hour: layout.Hour, tag: str = ""
) -> pa.RecordBatch:
    n = next_ - first
    start = hour.start_ms
    return pa.RecordBatch.from_arrays(
        [
            pa.array([f"/p{partition}/{o}{tag}" for o in range(first, next_)]),
            pa.array(range(first, next_), pa.int64()),
            pa.array([partition] * n, pa.int32()),
            pa.array(range(first, next_), pa.int64()),
            pa.array([start + o for o in range(n)], pa.timestamp("ms", tz="UTC")),
            pa.array([b"k%d" % o for o in range(first, next_)], pa.binary()),
            pa.array([1] * n, pa.int32()),
        ],
        schema=SCHEMA,
    )


def write_file(fs, staged: str, fmt: str, data: pa.RecordBatch) -> int:
    with fs.open_write(staged) as f:
        if fmt == "parquet":
            w = ParquetRecordWriter(f, SCHEMA)
        else:
            w = AvroRecordWriter(f, VALUE_SCHEMA, metadata=columns.WITH_SCHEMA_ID)
        w.write(data)
        return w.close().bytes


def load_run(
    fs,
    run: str,
    ranges,
    hours,
    fmt: str = "parquet",
    kind: str = "load",
    replaces: str | None = None,
    tag: str = "",
    do_commit: bool = True,
):
    """A run over ``ranges`` [(partition, first, next)], its offsets split evenly over
    ``hours``: one file per (range, hour). Committed unless ``do_commit`` is False;
    returns (manifest, moves)."""
    partitions, moves = [], []
    for partition, first, next_ in ranges:
        ledger = PartitionLedger(TOPIC, partition, first, next_, loaded=next_ - first)
        per = (next_ - first) // len(hours)
        for i, hour in enumerate(hours):
            a = first + i * per
            b = next_ if i == len(hours) - 1 else a + per
            final = layout.data_file(TOPIC, hour, partition, first, next_, run, fmt)
            staged = f"{layout.staging_dir(run)}/p{partition}-{first}/attempt-0/{hour.hr}.{fmt}"
            size = write_file(fs, staged, fmt, batch(partition, a, b, hour, tag))
            ledger.files.append(DataFile(final, b - a, hour.dt, hour.hr, size))
            moves.append((staged, final))
        partitions.append(ledger)
    manifest = Manifest(
        run, kind, "2026-11-22T03:00:00.000Z", 600_000, partitions, replaces=replaces
    )
    if do_commit:
        commit(fs, manifest, moves)
    return manifest, moves


def finalize(fs, hours, topic: str = TOPIC) -> None:
    for hour in hours:
        report = {"topic": topic, "dt": hour.dt, "hr": hour.hr, "loaded": 1, "produced": 1}
        fs.write_bytes(layout.success_marker(topic, hour), json.dumps(report).encode())


def rows(fs, directory: str) -> list[tuple]:
    """(partition, offset, page) of every row of a directory's data files, sorted."""
    out = []
    for st in fs.list(directory):
        name = st.path.rsplit("/", 1)[-1]
        if st.is_dir or name.startswith(("_", ".")):
            continue
        data = fs.read_bytes(st.path)
        if name.endswith(".parquet"):
            t = pq.read_table(pa.BufferReader(data))
            out += zip(
                t["_kafka_partition"].to_pylist(),
                t["_kafka_offset"].to_pylist(),
                t["page"].to_pylist(),
                strict=True,
            )
        else:
            for r in fastavro.reader(io.BytesIO(data)):
                out.append((r["_kafka_partition"], r["_kafka_offset"], r["page"]))
    return sorted(out)
