"""Idempotent and transactional producers: per partition, what each producer id last
wrote, and the transaction it has open here.

kafka-python 3 and librdkafka with enable.idempotence send (producer id, epoch,
base sequence) with every batch and retry with the same values. The broker must append
a batch once, answer a retried duplicate with the original offsets, and refuse gaps,
as Kafka's ProducerStateManager does. Only the last few batches per producer are kept:
clients keep at most five requests in flight, so a retry is always among them.

Transactions (docs/contracts/log.md, "Transactions"): a producer's first transactional
batch opens its transaction at that batch's offset; a marker (COMMIT/ABORT control batch)
closes it and records the coordinator epoch that wrote it. The smallest first offset of
the open transactions bounds the last stable offset.

The table survives restarts in producer-state snapshots (`encode_snapshot` /
`decode_snapshot`; the files are the log's, docs/contracts/log.md "Producer-state
snapshots").
"""

from __future__ import annotations

import struct
from collections import deque
from dataclasses import dataclass, field
from typing import NamedTuple

import crc32c

from broker.protocol.errors import ErrorCode
from broker.records.control import Marker
from broker.records.header import NO_PRODUCER_ID, BatchHeader

INT32_MAX = 0x7FFFFFFF


class BatchMetadata(NamedTuple):
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int


class CompletedTxn(NamedTuple):
    """A transaction a marker closed: its first offset here, the marker's offset, and
    the last stable offset once it closed (the first offset of the oldest transaction
    still open, else the offset after the marker): an aborted one's index entry."""

    producer_id: int
    first_offset: int
    last_offset: int
    aborted: bool
    last_stable_offset: int


@dataclass
class ProducerEntry:
    epoch: int
    batches: deque[BatchMetadata] = field(default_factory=deque)
    last_seen_ms: int = 0
    # The epoch of the coordinator that wrote this producer's last marker here: a marker
    # from an older one is TRANSACTION_COORDINATOR_FENCED.
    coordinator_epoch: int = -1
    # Offset of its last marker while no data batch of its epoch came after (-1: none).
    last_marker_offset: int = -1

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
        # Producer id -> first offset of its open transaction (few at a time).
        self.ongoing: dict[int, int] = {}

    def check(self, header: BatchHeader, marker: Marker | None = None) -> SequenceCheck:
        pid = header.producer_id
        if pid == NO_PRODUCER_ID:
            return APPEND
        entry = self.producers.get(pid)
        if header.is_control:
            return self._check_marker(entry, header.producer_epoch, marker)
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

    @staticmethod
    def _check_marker(
        entry: ProducerEntry | None, epoch: int, marker: Marker | None
    ) -> SequenceCheck:
        """Kafka's checks of an end-of-transaction marker: no sequence, but neither an
        older producer epoch nor an older coordinator epoch than this producer's last."""
        if entry is None:
            return APPEND
        if epoch < entry.epoch:
            return SequenceCheck(ErrorCode.INVALID_PRODUCER_EPOCH)
        if marker is not None and marker.coordinator_epoch < entry.coordinator_epoch:
            return SequenceCheck(ErrorCode.TRANSACTION_COORDINATOR_FENCED)
        return APPEND

    def record(
        self, header: BatchHeader, first_offset: int, now_ms: int, marker: Marker | None = None
    ) -> CompletedTxn | None:
        """Remember a batch that was appended at first_offset; for a marker, the
        transaction it closed (None when the producer had none open here)."""
        pid = header.producer_id
        if pid == NO_PRODUCER_ID:
            return None
        entry = self.producers.get(pid)
        if entry is None or header.producer_epoch != entry.epoch:
            # A new epoch restarts sequences; the coordinator's epoch carries over.
            previous = entry.coordinator_epoch if entry is not None else -1
            entry = self.producers[pid] = ProducerEntry(header.producer_epoch)
            entry.coordinator_epoch = previous
        entry.last_seen_ms = now_ms
        if header.is_control:
            if marker is None:
                return None
            entry.coordinator_epoch = marker.coordinator_epoch
            entry.last_marker_offset = first_offset
            start = self.ongoing.pop(pid, None)
            if start is None:
                return None
            stable = self.first_unstable_offset()
            stable = first_offset + 1 if stable is None else stable
            return CompletedTxn(pid, start, first_offset, marker.is_abort, stable)
        if header.is_transactional:
            self.ongoing.setdefault(pid, first_offset)
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
        return None

    def first_unstable_offset(self) -> int | None:
        """The first offset of the oldest open transaction, None when none is open."""
        return min(self.ongoing.values()) if self.ongoing else None

    def rebuild(self, batches) -> list[CompletedTxn]:
        """Replay batches already in the log, (header, marker or None) oldest first, into
        the table (at start-up and after a truncation: the batches after the snapshot it
        was loaded from, or the whole log), so a producer's retry of a batch written
        before a restart is still answered as a duplicate and open transactions are open
        again. A rebuilt producer was last seen at its batch's
        timestamp, as Kafka does. Returns the transactions the markers closed."""
        completed = []
        for header, marker in batches:
            if header.producer_id != NO_PRODUCER_ID:
                done = self.record(header, header.base_offset, header.max_timestamp, marker)
                if done is not None:
                    completed.append(done)
        return completed

    def last_offsets(self) -> dict[int, int]:
        """Producer id -> last offset of its last batch, or of its last marker when no data
        batch of its epoch is known (a fenced producer's): the log cleaner keeps that
        batch, so the producer's sequence and epoch survive (Kafka's rule)."""
        found = {}
        for pid, e in self.producers.items():
            if e.batches:
                found[pid] = e.batches[-1].last_offset
            elif e.last_marker_offset >= 0:
                found[pid] = e.last_marker_offset
        return found

    def expire(self, now_ms: int, expiration_ms: int) -> list[int]:
        """Forget the producers `is_expired` says are gone (producer.id.expiration.ms);
        returns their ids."""
        stale = [
            pid
            for pid, e in self.producers.items()
            if is_expired(e.last_seen_ms, pid in self.ongoing, now_ms, expiration_ms)
        ]
        for pid in stale:
            del self.producers[pid]
        return stale


def is_expired(last_seen_ms: int, in_transaction: bool, now_ms: int, expiration_ms: int) -> bool:
    """A producer id idle for producer.id.expiration.ms or longer is expired (Kafka's
    bound, inclusive), unless it has a transaction open here: its marker is still to
    come and the last stable offset waits for it (docs/contracts/transactions.md)."""
    return not in_transaction and now_ms - last_seen_ms >= expiration_ms


# -- snapshots (docs/contracts/log.md, "Producer-state snapshots") ---------------------
SNAPSHOT_VERSION = 1
_HEAD = struct.Struct(">hIi")  # version, CRC-32C of all after it, producer count
_PRODUCER = struct.Struct(">qhqiqqh")  # id, epoch, last seen, coord epoch, marker, txn, n
_BATCH = struct.Struct(">iiqqq")  # first seq, last seq, first offset, last offset, timestamp


class CorruptSnapshot(Exception):
    """A snapshot file that cannot be trusted (torn, garbled, another version)."""


def encode_snapshot(table: ProducerStateTable) -> bytes:
    """Every producer's entry and open transaction, all its retained batches included
    (Kafka keeps only the last one: a retry of an older in-flight batch after a restart
    would then be refused as out of order)."""
    body = bytearray()
    for pid, e in table.producers.items():
        body += _PRODUCER.pack(
            pid,
            e.epoch,
            e.last_seen_ms,
            e.coordinator_epoch,
            e.last_marker_offset,
            table.ongoing.get(pid, -1),
            len(e.batches),
        )
        for b in e.batches:
            body += _BATCH.pack(*b)
    count = len(table.producers)
    crc = crc32c.crc32c(struct.pack(">i", count) + body)
    return _HEAD.pack(SNAPSHOT_VERSION, crc, count) + body


def decode_snapshot(data: bytes, retain_batches: int = 5) -> ProducerStateTable:
    """The table `encode_snapshot` wrote; CorruptSnapshot when the bytes are not one."""
    if len(data) < _HEAD.size:
        raise CorruptSnapshot(f"{len(data)} bytes, shorter than the header")
    version, crc, count = _HEAD.unpack_from(data)
    if version != SNAPSHOT_VERSION:
        raise CorruptSnapshot(f"unknown version {version}")
    if crc32c.crc32c(memoryview(data)[6:]) != crc:
        raise CorruptSnapshot("CRC mismatch")
    table = ProducerStateTable(retain_batches)
    pos = _HEAD.size
    try:
        for _ in range(count):
            pid, epoch, seen, coordinator, marker, txn, n = _PRODUCER.unpack_from(data, pos)
            pos += _PRODUCER.size
            entry = ProducerEntry(epoch, last_seen_ms=seen, coordinator_epoch=coordinator)
            entry.last_marker_offset = marker
            for _ in range(n):
                entry.batches.append(BatchMetadata(*_BATCH.unpack_from(data, pos)))
                pos += _BATCH.size
            while len(entry.batches) > retain_batches:
                entry.batches.popleft()
            table.producers[pid] = entry
            if txn >= 0:
                table.ongoing[pid] = txn
    except struct.error as exc:
        raise CorruptSnapshot(f"truncated: {exc}") from None
    if pos != len(data):
        raise CorruptSnapshot(f"{len(data) - pos} stray bytes after the last producer")
    return table
