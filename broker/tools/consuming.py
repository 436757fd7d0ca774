"""Where the console consumer and the consumer perf tool get their records: the
partitions of some topics read outside any group (`PartitionReader`, the SimpleConsumer),
or as a member of a group (`GroupReader`, the GroupConsumer) committing what the tool
has handed on. Both give `poll(timeout_s) -> [(topic, partition, Record)]`, `done(...)` for a
record the tool has finished with, and `close()`."""

from __future__ import annotations

import re
import time

from broker.client.simple_consumer import FetchRequest, SimpleConsumer
from broker.protocol.errors import ErrorCode, UnknownTopicOrPartitionError
from broker.records.batch import Record
from broker.util.clock import SECOND_MS

EARLIEST = "earliest"
LATEST = "latest"
# How often a pattern is matched against the cluster's topics again (Kafka's
# metadata.max.age.ms would be 5 minutes; a console user expects new topics sooner).
_PATTERN_REFRESH_S = 5.0
_MAX_WAIT_MS = SECOND_MS


class PartitionReader:
    """Every partition of `topics` (or of the topics whose whole name matches `pattern`),
    or only `partition` of the one topic, from `start`: earliest, latest or an offset. A
    position that falls out of the log moves to its start (earliest) or end (latest)."""

    def __init__(
        self,
        bootstrap: str,
        topics: list[str] | None = None,
        pattern: str | None = None,
        partition: int | None = None,
        start: str | int = LATEST,
        timeout_s: float = 30.0,
    ) -> None:
        self.consumer = SimpleConsumer(bootstrap, client_id="console-consumer", timeout_s=timeout_s)
        self.pattern = re.compile(pattern) if pattern is not None else None
        self.topics = list(topics or [])
        self.partition = partition
        self.start = start
        self.reset = EARLIEST if start == EARLIEST else LATEST
        self.positions: dict[tuple[str, int], int] = {}
        self._matched_at = 0.0
        try:
            self._assign()
        except BaseException:
            self.consumer.close()
            raise

    def _assign(self) -> None:
        topics = self.topics
        if self.pattern is not None:
            self.consumer.cluster.refresh()
            topics = sorted(
                name
                for name, meta in self.consumer.cluster.topics.items()
                if not meta.is_internal and self.pattern.fullmatch(name)
            )
            self._matched_at = time.monotonic()
        for topic in topics:
            partitions = self.consumer.partitions_for(topic)
            if self.partition is not None:
                if self.partition not in partitions:
                    raise UnknownTopicOrPartitionError(
                        f"topic {topic!r} has no partition {self.partition}"
                    )
                partitions = [self.partition]
            for p in partitions:
                if (topic, p) not in self.positions:
                    self.positions[(topic, p)] = self._start_offset(topic, p, self.start)

    def _start_offset(self, topic: str, partition: int, start: str | int) -> int:
        if start == EARLIEST:
            return self.consumer.earliest_offset(topic, partition)
        if start == LATEST:
            return self.consumer.latest_offset(topic, partition)
        return start

    def poll(self, timeout_s: float) -> list[tuple[str, int, Record]]:
        if self.pattern is not None and time.monotonic() - self._matched_at > _PATTERN_REFRESH_S:
            self._assign()
        if not self.positions:
            time.sleep(min(timeout_s, _PATTERN_REFRESH_S))
            return []
        wait = int(min(timeout_s * SECOND_MS, _MAX_WAIT_MS))
        requests = [FetchRequest(t, p, offset) for (t, p), offset in self.positions.items()]
        results = self.consumer.fetch_many(requests, max_wait_ms=wait, min_bytes=1)
        records = []
        for (topic, partition), result in sorted(results.items()):
            if result.error == ErrorCode.OFFSET_OUT_OF_RANGE:
                self.positions[(topic, partition)] = self._start_offset(
                    topic, partition, self.reset
                )
                continue
            result.raise_for_error()
            records += [(topic, partition, record) for record in result.records()]
            self.positions[(topic, partition)] = result.next_offset
        return records

    def done(self, topic: str, partition: int, offset: int) -> None:
        """Nothing to remember: these reads belong to no group."""

    def close(self) -> None:
        self.consumer.close()
