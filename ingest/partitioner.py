"""Output partitions and audit windows of decoded rows, computed on whole batches.

``EventHourPartitioner`` puts each row in the UTC hour of its event time:
``(dt="YYYY-MM-DD", hr="HH")``. The event time is a field of the record named by
a dotted path (default ``header.time``, the EventHeader of the product's
schemas); a timestamp column is used as is, an integer one is taken as
milliseconds since the epoch. When the target schema has no such field, or a
row's value is null, the row's Kafka timestamp (``_kafka_timestamp``, the
producer's CreateTime) is used instead, so every row lands in some hour.

``audit_windows`` gives each row's audit window: the start (ms, aligned to the
epoch) of the ``window_ms`` window holding its Kafka timestamp. docs/contracts/audit.md:
producers count by the Kafka timestamp, so the loader does too,
whatever the event-time field says.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple, Protocol

import pyarrow as pa
import pyarrow.compute as pc

KAFKA_TIMESTAMP = "_kafka_timestamp"
HOUR_MS = 3_600_000
DEFAULT_WINDOW_MS = 600_000


class HourKey(NamedTuple):
    dt: str  # YYYY-MM-DD
    hr: str  # HH


class Partitioner(Protocol):
    def assign(self, batch: pa.RecordBatch) -> pa.Array:
        """An int64 partition id per row (rows with equal ids share a partition)."""
        ...

    def key(self, partition_id: int) -> HourKey:
        """The output partition an id stands for."""
        ...


def epoch_ms(column: pa.Array) -> pa.Array:
    """Milliseconds since the epoch of a timestamp (any unit) or integer (ms) column."""
    if pa.types.is_timestamp(column.type):
        factor = {"s": 1000, "ms": 1, "us": 1000, "ns": 1_000_000}[column.type.unit]
        raw = column.cast(pa.int64())
        if column.type.unit in ("us", "ns"):
            return _floor_div(raw, factor)
        return raw if factor == 1 else pc.multiply(raw, factor)
    if pa.types.is_integer(column.type):
        return column.cast(pa.int64())
    raise TypeError(f"an event time must be a timestamp or integer column, not {column.type}")


def _floor_div(values: pa.Array, divisor: int) -> pa.Array:
    """Integer division rounding down (toward minus infinity), also for times before 1970."""
    quotient = pc.divide(values, divisor)  # truncates toward zero
    inexact_negative = pc.and_(
        pc.less(values, 0), pc.not_equal(pc.multiply(quotient, divisor), values)
    )
    return pc.subtract(quotient, inexact_negative.cast(pa.int64()))


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


class EventHourPartitioner:
    def __init__(self, time_field: str | None = "header.time") -> None:
        self.time_field = time_field

    def event_ms(self, batch: pa.RecordBatch) -> pa.Array:
        """The event time of every row in ms, the Kafka timestamp where it has none."""
        fallback = epoch_ms(batch.column(KAFKA_TIMESTAMP))
        column = _field(batch, self.time_field) if self.time_field else None
        if column is None:
            return fallback
        return pc.coalesce(epoch_ms(column), fallback)

    def assign(self, batch: pa.RecordBatch) -> pa.Array:
        """The hour of every row as ms since the epoch of its start."""
        return pc.multiply(_floor_div(self.event_ms(batch), HOUR_MS), HOUR_MS)

    def key(self, partition_id: int) -> HourKey:
        return hour_key(partition_id)

    def split(self, batch: pa.RecordBatch) -> Iterator[tuple[HourKey, pa.RecordBatch]]:
        """The rows of each hour, hours in time order, rows in their batch order."""
        yield from split_by(self, batch)


def hour_key(hour_start_ms: int) -> HourKey:
    stamp = pa.scalar(hour_start_ms, pa.timestamp("ms", tz="UTC")).as_py()
    return HourKey(stamp.strftime("%Y-%m-%d"), stamp.strftime("%H"))


def split_by(
    partitioner: Partitioner, batch: pa.RecordBatch
) -> Iterator[tuple[HourKey, pa.RecordBatch]]:
    ids = partitioner.assign(batch)
    distinct = pc.unique(ids)
    if len(distinct) == 1:
        yield partitioner.key(distinct[0].as_py()), batch
        return
    for value in sorted(distinct.to_pylist()):
        yield partitioner.key(value), batch.filter(pc.equal(ids, value))


def audit_windows(batch: pa.RecordBatch, window_ms: int = DEFAULT_WINDOW_MS) -> pa.Array:
    """The start (ms) of the audit window of every row's Kafka timestamp."""
    return pc.multiply(_floor_div(epoch_ms(batch.column(KAFKA_TIMESTAMP)), window_ms), window_ms)


def window_counts(batch: pa.RecordBatch, window_ms: int = DEFAULT_WINDOW_MS) -> dict[int, int]:
    """Rows per audit window start (ms)."""
    if batch.num_rows == 0:
        return {}
    counts = pc.value_counts(audit_windows(batch, window_ms))
    return dict(
        zip(counts.field("values").to_pylist(), counts.field("counts").to_pylist(), strict=True)
    )
