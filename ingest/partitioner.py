"""Partitioners: the plug point that puts each decoded row in a directory below
``data/<topic>/``, computed on whole batches. Chosen per topic by the ``partitioner`` /
``per.topic.partitioner`` keys (ingest/plugins.py).

A partitioner gives every row an int64 partition id (``assign``) and names the
directory an id stands for (``key``: a NamedTuple whose fields are the directory levels,
see ingest/layout.py). ``period_ms`` tells the audit what a directory is: the length of
the event-time window one directory holds (an hour, a day), or None when directories
are not event time.

* ``EventHourPartitioner`` (``event-hour``, the default): the UTC hour of the row's
  event time, ``Hour(dt, hr)`` -> ``dt=YYYY-MM-DD/hr=HH``.
* ``EventDayPartitioner`` (``event-day``): the UTC day, ``Day(dt)`` -> ``dt=YYYY-MM-DD``.
* ``IngestionTimePartitioner`` (``ingestion-time``): the UTC hour the run that first
  loaded the records started (a rerun keeps it), whatever their event time: for topics
  without a usable event time. ``period_ms`` is None.

The event time is a field of the record named by a dotted path (``time.field``, default
``header.time``, the EventHeader of the product's schemas); a timestamp column is used as
is, an integer one is taken as milliseconds since the epoch. When the batch has no such
field, or a row's value is null, the row's Kafka timestamp (``_kafka_timestamp``, the
producer's CreateTime) is used instead, so every row lands in some directory.

``audit_windows`` gives each row's audit window: the window of ``window_ms`` holding its
Kafka timestamp (schemas/windows.py; docs/contracts/audit.md). Producers count by the Kafka timestamp, so the
loader does too, whatever the event-time field or the partitioner says.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, Protocol

import pyarrow as pa
import pyarrow.compute as pc

from broker.util.clock import DAY_MS, HOUR_MS, SECOND_MS
from ingest.columns import TIMESTAMP
from ingest.layout import Day, Hour
from schemas.windows import DEFAULT_AUDIT_WINDOW_MS, window_start


class Partitioner(Protocol):
    # The event-time length of one directory (its id is the window's start), or None
    # when directories are not event time.
    period_ms: int | None

    def assign(self, batch: pa.RecordBatch) -> pa.Array:
        """An int64 partition id per row (rows with equal ids share a partition)."""
        ...

    def key(self, partition_id: int) -> Any:
        """The output partition (a NamedTuple of directory levels) an id stands for."""
        ...


def epoch_ms(column: pa.Array) -> pa.Array:
    """Milliseconds since the epoch of a timestamp (any unit) or integer (ms) column."""
    if pa.types.is_timestamp(column.type):
        unit, raw = column.type.unit, column.cast(pa.int64())
        if unit == "s":
            return pc.multiply(raw, SECOND_MS)
        if unit == "ms":
            return raw
        per_ms = {"us": 1000, "ns": 1_000_000}[unit]
        return pc.divide(window_start(raw, per_ms), per_ms)  # rounds down, also before 1970
    if pa.types.is_integer(column.type):
        return column.cast(pa.int64())
    raise TypeError(f"an event time must be a timestamp or integer column, not {column.type}")


def _field(batch: pa.RecordBatch, path: str) -> pa.Array | None:
    """The column at a dotted path into nested structs, None if the schema has none."""
    head, *rest = path.split(".")
    if head not in batch.schema.names:
        return None
    column = batch.column(head)
    for name in rest:
        if not pa.types.is_struct(column.type) or column.type.get_field_index(name) < 0:
            return None
        column = pc.struct_field(column, name)
    return column


class EventTimePartitioner:
    """Rows by the ``period_ms`` window of their event time; ``key_of(window start)``
    names the directory."""

    def __init__(
        self, time_field: str | None, period_ms: int, key_of: Callable[[int], Any]
    ) -> None:
        self.time_field = time_field
        self.period_ms = period_ms
        self.key_of = key_of

    def event_ms(self, batch: pa.RecordBatch) -> pa.Array:
        """The event time of every row in ms, the Kafka timestamp where it has none."""
        fallback = epoch_ms(batch.column(TIMESTAMP.name))
        column = _field(batch, self.time_field) if self.time_field else None
        if column is None:
            return fallback
        return pc.coalesce(epoch_ms(column), fallback)

    def assign(self, batch: pa.RecordBatch) -> pa.Array:
        """The window of every row as ms since the epoch of its start."""
        return window_start(self.event_ms(batch), self.period_ms)

    def key(self, partition_id: int) -> Any:
        return self.key_of(partition_id)

    def split(self, batch: pa.RecordBatch) -> Iterator[tuple[Any, pa.RecordBatch]]:
        """The rows of each directory, in time order, rows in their batch order."""
        yield from split_by(self, batch)


class EventHourPartitioner(EventTimePartitioner):
    def __init__(self, time_field: str | None = "header.time") -> None:
        super().__init__(time_field, HOUR_MS, Hour.of_ms)


class EventDayPartitioner(EventTimePartitioner):
    def __init__(self, time_field: str | None = "header.time") -> None:
        super().__init__(time_field, DAY_MS, Day.of_ms)


class IngestionTimePartitioner:
    """Every row in the hour of ``ingest_time_ms``: the start of the run that first
    loaded the range (a rerun passes the original run's time, so files stay put)."""

    period_ms = None

    def __init__(self, ingest_time_ms: int) -> None:
        self.hour_ms = window_start(ingest_time_ms, HOUR_MS)

    def assign(self, batch: pa.RecordBatch) -> pa.Array:
        return pa.nulls(batch.num_rows, pa.int64()).fill_null(self.hour_ms)

    def key(self, partition_id: int) -> Hour:
        return Hour.of_ms(partition_id)


def split_by(
    partitioner: Partitioner, batch: pa.RecordBatch
) -> Iterator[tuple[Any, pa.RecordBatch]]:
    ids = partitioner.assign(batch)
    distinct = pc.unique(ids)
    if len(distinct) == 1:
        yield partitioner.key(distinct[0].as_py()), batch
        return
    for value in sorted(distinct.to_pylist()):
        yield partitioner.key(value), batch.filter(pc.equal(ids, value))


def audit_windows(batch: pa.RecordBatch, window_ms: int = DEFAULT_AUDIT_WINDOW_MS) -> pa.Array:
    """The start (ms) of the audit window of every row's Kafka timestamp."""
    return window_start(batch.column(TIMESTAMP.name), window_ms)


def window_counts(
    batch: pa.RecordBatch, window_ms: int = DEFAULT_AUDIT_WINDOW_MS
) -> dict[int, int]:
    """Rows per audit window start (ms)."""
    if batch.num_rows == 0:
        return {}
    counts = pc.value_counts(audit_windows(batch, window_ms))
    return dict(
        zip(counts.field("values").to_pylist(), counts.field("counts").to_pylist(), strict=True)
    )
