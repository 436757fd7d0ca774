"""Reading exactly [start, end) of one partition through the fetch API.

A fetch starts at the batch containing the requested offset and may run past `end`;
records outside the range are dropped here, so a task never loads an offset twice or
one that belongs to the next run. Offsets inside the range that carry no record
(control batches, compacted-away offsets) are counted as skipped, which is what lets
every partition's ledger balance: next - first = loaded + quarantined + skipped.

The consumer's isolation level (`kafka.isolation.level`) decides which batches hold
records: at read_committed the records of aborted transactions are left out by the
client's rule (broker/client/isolation.py `classify_batches`), and the reader counts
them (`aborted`, with their timestamps for the audit) apart from the markers
(`markers`); both are part of `skipped`: offsets without a loaded record that are not
missing (docs/contracts/hdfs-load.md, "Transactions").

The fetch API finds the partition's leader itself and follows it when it moves; the
reader notes which brokers answered (`read_from`), so the manifest can say where a range
was read from.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa

from broker.client.isolation import ABORTED, CONTROL, DATA, classify_batches
from broker.client.simple_consumer import SimpleConsumer
from broker.protocol.errors import KafkaError
from broker.records.columnar import RecordColumns, fetched_columns


class RangeStalled(RuntimeError):
    """The broker kept answering with nothing below the planned end."""


@dataclass
class RangeReader:
    consumer: SimpleConsumer
    topic: str
    partition: int
    start: int
    end: int
    fetch_bytes: int = 8 << 20
    max_bytes: int | None = None  # stop early (at a batch boundary) past this many bytes
    stall_timeout_s: float = 60.0

    def __post_init__(self) -> None:
        self.position = self.start  # next offset to read
        self.records = 0
        self.bytes_read = 0
        self.read_from: list[int] = []  # brokers whose answers moved the position, in turn
        self.aborted = 0  # records of aborted transactions in the range (read_committed)
        self.markers = 0  # offsets of control batches (transaction markers) in the range
        self.aborted_timestamps: list[pa.Array] = []  # of those aborted records

    @property
    def skipped(self) -> int:
        return (self.position - self.start) - self.records

    @property
    def stopped_early(self) -> bool:
        return self.position < self.end

    def chunks(self) -> Iterator[RecordColumns]:
        """The records of each fetch as columns, in offset order, until `end` (or the byte
        budget). A fetch's batches are parsed column-wise (broker/records/columnar.py),
        never into one object per record."""
        stalled_since = None
        while self.position < self.end:
            if self.max_bytes is not None and self.bytes_read >= self.max_bytes:
                return
            try:
                result = self.consumer.fetch(
                    self.topic, self.partition, self.position, max_bytes=self.fetch_bytes
                )
            except KafkaError as exc:
                if not exc.retriable:
                    raise
                stalled_since = self._wait(stalled_since, exc)
                continue
            result.raise_for_error()
            buf = result.records_bytes
            kinds = list(classify_batches(buf, result.isolation_level, result.aborted_transactions))
            batch = fetched_columns(
                buf, self.position, self.end, batches=[(p, h) for p, h, k in kinds if k == DATA]
            )
            next_offset = min(result.next_offset, self.end)
            if next_offset <= self.position:
                # Below the planned end there must be data; the leader may be moving.
                stalled_since = self._wait(stalled_since, None)
                continue
            stalled_since = None
            if not self.read_from or self.read_from[-1] != result.node_id:
                self.read_from.append(result.node_id)
            self.bytes_read += len(result.records_bytes)
            self.records += len(batch)
            self._count_skipped(buf, kinds, next_offset)
            self.position = next_offset
            if len(batch):
                yield batch

    def _count_skipped(self, buf, kinds, next_offset: int) -> None:
        """Markers and aborted records in [position, next_offset)."""
        for _, header, kind in kinds:
            if kind == CONTROL:
                first = max(header.base_offset, self.position)
                self.markers += max(0, min(header.next_offset, next_offset) - first)
        aborted = [(p, h) for p, h, k in kinds if k == ABORTED]
        if aborted:
            records = fetched_columns(buf, self.position, next_offset, batches=aborted)
            self.aborted += len(records)
            self.aborted_timestamps.append(records.timestamp)

    def _wait(self, since: float | None, error: Exception | None) -> float:
        now = time.monotonic()
        since = now if since is None else since
        if now - since > self.stall_timeout_s:
            raise RangeStalled(
                f"{self.topic}-{self.partition}: no progress at offset {self.position} (end {self.end}) "
                f"for {self.stall_timeout_s:.0f}s" + (f": {error}" if error else "")
            ) from error
        time.sleep(min(1.0, 0.05 * 2 ** min(5, int(now - since))))
        return since
