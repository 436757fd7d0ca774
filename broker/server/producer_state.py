"""Idempotent producers: per partition, what each producer id last wrote.

kafka-python 3 and librdkafka with enable.idempotence send (producer id, epoch,
base sequence) with every batch and retry with the same values. The broker must append
a batch once, answer a retried duplicate with the original offsets, and refuse gaps,
as Kafka's ProducerStateManager does. Only the last few batches per producer are kept:
clients keep at most five requests in flight, so a retry is always among them.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import NamedTuple

from broker.protocol.errors import ErrorCode
from broker.records.header import NO_PRODUCER_ID, BatchHeader

INT32_MAX = 0x7FFFFFFF


class BatchMetadata(NamedTuple):
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int


@dataclass
class ProducerEntry:
    epoch: int
    batches: deque[BatchMetadata] = field(default_factory=deque)
    last_seen_ms: int = 0

    @property
    def last_seq(self) -> int | None:
        return self.batches[-1].last_seq if self.batches else None


class SequenceCheck(NamedTuple):
    """The verdict on one batch: append it, answer it as a duplicate, or refuse it."""

    error: ErrorCode
    duplicate_of: BatchMetadata | None = None


APPEND = SequenceCheck(ErrorCode.NONE)


def _next_seq(seq: int) -> int:
    return 0 if seq == INT32_MAX else seq + 1


class ProducerStateTable:
    """Sequence bookkeeping of one partition."""

    def __init__(self, retain_batches: int = 5) -> None:
        self.retain_batches = retain_batches
        self.producers: dict[int, ProducerEntry] = {}

    def check(self, header: BatchHeader) -> SequenceCheck:
        pid = header.producer_id
        if pid == NO_PRODUCER_ID:
            return APPEND
        entry = self.producers.get(pid)
        epoch, first_seq = header.producer_epoch, header.base_sequence
        if entry is None:
            # A producer unknown here (new, or its state expired): start it where it says.
            return APPEND
        if epoch < entry.epoch:
            return SequenceCheck(ErrorCode.INVALID_PRODUCER_EPOCH)
        if epoch > entry.epoch:
            # A bumped epoch restarts sequences at zero.
            return (
                APPEND if first_seq == 0 else SequenceCheck(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER)
            )
        for batch in entry.batches:
            if batch.first_seq == first_seq and batch.last_seq == header.last_sequence:
                return SequenceCheck(ErrorCode.DUPLICATE_SEQUENCE_NUMBER, batch)
        last = entry.last_seq
        if last is not None and first_seq != _next_seq(last):
            return SequenceCheck(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER)
        return APPEND

    def record(self, header: BatchHeader, first_offset: int, now_ms: int) -> None:
        """Remember a batch that was appended at first_offset."""
        pid = header.producer_id
        if pid == NO_PRODUCER_ID:
            return
        entry = self.producers.get(pid)
        if entry is None or header.producer_epoch != entry.epoch:
            entry = self.producers[pid] = ProducerEntry(header.producer_epoch)
        entry.batches.append(
            BatchMetadata(
                header.base_sequence,
                header.last_sequence,
                first_offset,
                first_offset + header.last_offset_delta,
                header.max_timestamp,
            )
        )
        while len(entry.batches) > self.retain_batches:
            entry.batches.popleft()
        entry.last_seen_ms = now_ms

    def rebuild(self, headers) -> None:
        """Restore the table from batches already in the log (at start-up), so a producer's
        retry of a batch written just before a restart is still answered as a duplicate.
        A rebuilt producer was last seen at its batch's timestamp, as Kafka does."""
        for header in headers:
            if header.producer_id != NO_PRODUCER_ID and not header.is_control:
                self.record(header, header.base_offset, header.max_timestamp)

    def last_offsets(self) -> dict[int, int]:
        """Producer id -> last offset of its last batch (the log cleaner keeps that batch)."""
        return {pid: e.batches[-1].last_offset for pid, e in self.producers.items() if e.batches}

    def expire(self, now_ms: int, expiration_ms: int) -> None:
        stale = [
            pid for pid, e in self.producers.items() if now_ms - e.last_seen_ms > expiration_ms
        ]
        for pid in stale:
            del self.producers[pid]
