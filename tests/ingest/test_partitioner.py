"""Partitioners and audit windows on decoded batches."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa

from broker.util.clock import DAY_MS, HOUR_MS
from ingest import layout
from ingest.decoders import arrow_schema_for
from ingest.layout import Day, Hour
from ingest.partitioner import (
    EventDayPartitioner,
    EventHourPartitioner,
    IngestionTimePartitioner,
    audit_windows,
    split_by,
    window_counts,
)
from schemas import catalog

SCHEMA = arrow_schema_for(catalog.load_str("PageViewEvent.v3"))


def ms(text: str) -> int:
    return int(dt.datetime.fromisoformat(text).replace(tzinfo=dt.UTC).timestamp() * 1000)


def batch(event_times: list[int | None], kafka_times: list[int], header_null=()) -> pa.RecordBatch:
    rows = []
    for i, (event, kafka) in enumerate(zip(event_times, kafka_times, strict=True)):
        header = (
            None
            if i in header_null
            else {"time": event, "host": "h", "service": "s", "event_id": "e"}
        )
        rows.append(
            {
                "header": header,
                "member_id": i,
                "page_key": "k",
                "page_url": "u",
                "referrer": None,
                "_kafka_partition": 0,
                "_kafka_offset": i,
                "_kafka_timestamp": kafka,
                "_kafka_key": None,
                "_schema_id": 1,
            }
        )
    plain = SCHEMA.set(
        0,
        pa.field(
            "header",
            pa.struct(
                [
                    pa.field(f.name, pa.int64() if f.name == "time" else f.type)
                    for f in SCHEMA.field("header").type
                ]
            ),
        ),
    ).set(SCHEMA.get_field_index("_kafka_timestamp"), pa.field("_kafka_timestamp", pa.int64()))
    return pa.RecordBatch.from_pylist(rows, schema=plain).cast(SCHEMA)


def test_rows_crossing_hour_boundaries_land_in_their_event_hour():
    times = [
        ms("2024-05-01T11:59:59.999"),
        ms("2024-05-01T12:00:00"),
        ms("2024-05-01T12:59:59.999"),
        ms("2024-05-01T23:30:00"),
        ms("2024-05-02T00:00:00.001"),
        ms("2024-05-01T12:10:00"),
    ]
    # Kafka timestamps all in another hour: the event time wins when present.
    b = batch(times, [ms("2030-01-01T05:00:00")] * len(times))
    parts = list(EventHourPartitioner().split(b))
    assert [key for key, _ in parts] == [
        Hour("2024-05-01", "11"),
        Hour("2024-05-01", "12"),
        Hour("2024-05-01", "23"),
        Hour("2024-05-02", "00"),
    ]
    offsets = {key: rows.column("_kafka_offset").to_pylist() for key, rows in parts}
    assert offsets[Hour("2024-05-01", "12")] == [1, 2, 5]  # batch order kept
    assert sum(rows.num_rows for _, rows in parts) == b.num_rows


def test_null_event_time_or_null_header_falls_back_to_the_kafka_timestamp():
    b = batch(
        [None, ms("2024-05-01T12:00:00"), ms("2024-05-01T12:00:00")],
        [ms("2024-05-01T07:15:00"), ms("2024-05-01T08:00:00"), ms("2024-05-01T09:45:00")],
        header_null={2},
    )
    hours = EventHourPartitioner().assign(b).to_pylist()
    assert [Hour.of_ms(h) for h in hours] == [
        Hour("2024-05-01", "07"),
        Hour("2024-05-01", "12"),
        Hour("2024-05-01", "09"),
    ]


def test_missing_field_or_no_field_uses_the_kafka_timestamp():
    b = batch([ms("2024-05-01T12:00:00")], [ms("2024-05-01T03:00:00")])
    for partitioner in (
        EventHourPartitioner("header.nope"),
        EventHourPartitioner("nope.time"),
        EventHourPartitioner("page_key.time"),
        EventHourPartitioner(None),
    ):
        assert [Hour.of_ms(h) for h in partitioner.assign(b).to_pylist()] == [
            Hour("2024-05-01", "03")
        ]


def test_integer_time_field_is_milliseconds_and_path_is_configurable():
    b = batch([ms("2024-05-01T12:00:00")], [ms("2024-05-01T03:00:00")])
    # member_id (an int64 column) stands in for an integer epoch-ms field
    b = b.set_column(1, "member_id", pa.array([ms("2020-02-29T23:59:59")], pa.int64()))
    ((key, _),) = split_by(EventHourPartitioner("member_id"), b)
    assert key == Hour("2020-02-29", "23")


def test_times_before_1970_round_down():
    b = batch([-1, -HOUR_MS, -HOUR_MS - 1], [0, 0, 0])
    keys = [Hour.of_ms(h) for h in EventHourPartitioner().assign(b).to_pylist()]
    assert keys == [
        Hour("1969-12-31", "23"),
        Hour("1969-12-31", "23"),
        Hour("1969-12-31", "22"),
    ]


def test_audit_windows_follow_the_kafka_timestamp_not_the_event_time():
    kafka = [
        ms("2024-05-01T12:09:59.999"),
        ms("2024-05-01T12:10:00"),
        ms("2024-05-01T12:19:00"),
        ms("2024-05-01T12:59:00"),
    ]
    b = batch([ms("2000-01-01T00:00:00")] * 4, kafka)
    assert audit_windows(b).to_pylist() == [
        ms("2024-05-01T12:00:00"),
        ms("2024-05-01T12:10:00"),
        ms("2024-05-01T12:10:00"),
        ms("2024-05-01T12:50:00"),
    ]
    assert window_counts(b) == {
        ms("2024-05-01T12:00:00"): 1,
        ms("2024-05-01T12:10:00"): 2,
        ms("2024-05-01T12:50:00"): 1,
    }
    assert window_counts(b, window_ms=HOUR_MS) == {ms("2024-05-01T12:00:00"): 4}
    assert window_counts(b.slice(0, 0)) == {}


def test_event_day_partitions_write_dt_only():
    times = [ms("2024-05-01T23:59:59.999"), ms("2024-05-02T00:00:00"), ms("2024-05-01T00:00:00")]
    b = batch(times, [ms("2030-01-01T05:00:00")] * 3, header_null={})
    parts = list(EventDayPartitioner().split(b))
    assert [key for key, _ in parts] == [Day("2024-05-01"), Day("2024-05-02")]
    assert [layout.key_dirs(key) for key, _ in parts] == ["dt=2024-05-01", "dt=2024-05-02"]
    assert parts[0][1].column("_kafka_offset").to_pylist() == [0, 2]
    assert EventDayPartitioner().period_ms == DAY_MS


def test_ingestion_time_puts_every_row_in_the_hour_of_the_load():
    b = batch([ms("2024-05-01T12:00:00"), None], [ms("2024-05-01T03:00:00")] * 2)
    partitioner = IngestionTimePartitioner(ms("2026-11-22T03:00:12.345"))
    ((key, rows),) = split_by(partitioner, b)
    assert key == Hour("2026-11-22", "03") and rows.num_rows == 2
    assert partitioner.period_ms is None
