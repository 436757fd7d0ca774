"""A partition this broker hosts: its log, leader epoch, high watermark and producers.

The high watermark is kept apart from the log end offset: it is the offset below which
every in-sync replica has the data, and consumers only ever read below it. With one
broker the ISR is this broker alone, so it follows the log end after each append;
replication will advance it from followers' fetch positions instead.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from broker.log.log import Log
from broker.protocol.errors import ErrorCode
from broker.records.header import BatchHeader
from broker.server.producer_state import ProducerStateTable


class AppendResult(NamedTuple):
    error: ErrorCode
    base_offset: int = -1
    log_append_time_ms: int = -1
    message: str | None = None


# How far back in the log producer state is rebuilt at start-up: clients retry only their
# last few batches, which are far more recent than this.
REBUILD_WINDOW_BYTES = 64 << 20


def _recent_headers(log: Log) -> list[BatchHeader]:
    """Headers of the batches in the newest REBUILD_WINDOW_BYTES of the log, oldest first."""
    segments, size = [], 0
    for segment in reversed(log.segments):
        segments.append(segment)
        size += segment.size
        if size >= REBUILD_WINDOW_BYTES:
            break
    return [h for seg in reversed(segments) for _, h in seg.headers(0, seg.size, 64 * 1024)]


class Partition:
    def __init__(
        self,
        log: Log,
        broker_id: int,
        leader_epoch: int | None = None,
        high_watermark: int | None = None,
        retain_batches: int = 5,
    ) -> None:
        self.log = log
        self.broker_id = broker_id
        # Leader epochs never decrease, across restarts too (librdkafka ignores metadata
        # with a lower one): by default, the last epoch that appended to the log (0 for a
        # log nothing was appended to). The log records it with the first append.
        if leader_epoch is None:
            leader_epoch = max(log.leader_epochs.latest_epoch(), 0)
        self.leader_epoch = leader_epoch
        self.isr: tuple[int, ...] = (broker_id,)
        hw = log.log_end_offset if high_watermark is None else high_watermark
        self.high_watermark = max(log.log_start_offset, min(hw, log.log_end_offset))
        self.producers = ProducerStateTable(retain_batches)
        self.producers.rebuild(_recent_headers(log))
        # Told (topic, partition) whenever the high watermark moves: wakes parked fetches.
        self.on_high_watermark: Callable[[str, int], None] = lambda topic, partition: None
        # The only in-sync replica has everything it recovered: a checkpoint written
        # before an unclean stop must not hide the records appended after it.
        self.maybe_advance_high_watermark()

    @property
    def topic(self) -> str:
        return self.log.topic

    @property
    def index(self) -> int:
        return self.log.partition

    def append_as_leader(
        self, records: bytearray, batches: list[tuple[int, BatchHeader]], now_ms: int
    ) -> AppendResult:
        """Append validated batches unless a producer sequence says otherwise.

        A request carries one batch per partition from the clients we serve; if it
        carries several, every batch is checked before any is written, so a refused
        request leaves the log untouched.
        """
        for _, header in batches:
            verdict = self.producers.check(header)
            if verdict.error == ErrorCode.DUPLICATE_SEQUENCE_NUMBER and len(batches) == 1:
                # A retry of a batch already in the log: answer with its original offset.
                return AppendResult(ErrorCode.NONE, verdict.duplicate_of.first_offset, -1)
            if verdict.error != ErrorCode.NONE:
                return AppendResult(
                    verdict.error,
                    message=f"producer {header.producer_id} sequence "
                    f"{header.base_sequence} epoch {header.producer_epoch} refused",
                )
        append_time = now_ms if self.log.config.log_append_time else None
        info = self.log.append(records, batches, self.leader_epoch, append_time)
        offset = info.first_offset
        for _, header in batches:
            self.producers.record(header, offset, now_ms)
            offset += header.last_offset_delta + 1
        self.maybe_advance_high_watermark()
        return AppendResult(
            ErrorCode.NONE, info.first_offset, -1 if append_time is None else now_ms
        )

    def maybe_advance_high_watermark(self) -> bool:
        """Single replica: everything appended is committed."""
        new_hw = self.log.log_end_offset
        if new_hw > self.high_watermark:
            self.high_watermark = new_hw
            self.on_high_watermark(self.topic, self.index)
            return True
        return False
