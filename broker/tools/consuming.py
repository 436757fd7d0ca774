"""Where the console consumer and the consumer perf tool get their records: the
partitions of some topics read outside any group (`PartitionReader`, the SimpleConsumer),
or as a member of a group (`GroupReader`, the GroupConsumer) committing what the tool
has handed on. Both give `poll(timeout_s) -> [(topic, partition, Record)]`, `done(...)` for a
record the tool has finished with, and `close()`."""

from __future__ import annotations

import re
import time

from broker.client.group import GroupConsumer, RebalanceListener
from broker.client.security import SecurityConfig, split_security
from broker.client.simple_consumer import FetchRequest, SimpleConsumer
from broker.config.definition import load_properties
from broker.protocol.errors import ErrorCode, UnknownTopicOrPartitionError
from broker.records.batch import Record
from broker.util.clock import SECOND_MS

EARLIEST = "earliest"
LATEST = "latest"
# How often a pattern is matched against the cluster's topics again (Kafka's
# metadata.max.age.ms would be 5 minutes; a console user expects new topics sooner).
_PATTERN_REFRESH_S = 5.0
_MAX_WAIT_MS = SECOND_MS


def consumer_properties(
    path: str | None, pairs: list[tuple[str, str]] = ()
) -> tuple[SecurityConfig, dict[str, str]]:
    """(SecurityConfig, group consumer settings) of a --consumer.config file, then
    --consumer-property pairs; the file's bootstrap.servers gives way to the tool's
    --bootstrap-server. Raises ConfigError naming a bad security key and value."""
    props = load_properties(path) if path else {}
    props.pop("bootstrap.servers", None)
    props.update(dict(pairs))
    return split_security(props)


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
        security: SecurityConfig | None = None,
    ) -> None:
        self.consumer = SimpleConsumer(
            bootstrap, client_id="console-consumer", timeout_s=timeout_s, security=security
        )
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


class GroupReader(RebalanceListener):
    """A member of `group` subscribed to `topics` (or to `pattern`), starting where the
    group committed, else at `reset` (earliest or latest). It commits the offsets of the
    records the tool has finished with (`done`), not its positions: what was fetched but
    not handed on is read again by whoever comes next. Commits go asynchronously after
    each poll, synchronously before partitions are revoked and on close. `settings` are
    more consumer keys (Kafka's names), checked by the group consumer's ConfigDef."""

    def __init__(
        self,
        bootstrap: str,
        group: str,
        topics: list[str] | None = None,
        pattern: str | None = None,
        reset: str = LATEST,
        settings: dict[str, str] | None = None,
        security: SecurityConfig | None = None,
    ) -> None:
        config = {"client.id": "console-consumer", **(settings or {})}
        config.update(
            {"group.id": group, "auto.offset.reset": reset, "enable.auto.commit": "false"}
        )
        self.consumer = GroupConsumer(bootstrap, security, **config)
        self.finished: dict[tuple[str, int], int] = {}  # next offset to commit, not yet sent
        self._held: list[tuple[str, int, Record]] = []
        try:
            self.consumer.subscribe(topics=topics, pattern=pattern, listener=self)
        except BaseException:
            self.consumer.close(autocommit=False)
            raise

    def wait_for_assignment(self, timeout_s: float) -> None:
        """Poll until the group gave this member its partitions (records that came
        meanwhile are kept for the next poll)."""
        deadline = time.monotonic() + timeout_s
        while not self.consumer.assignment() and not self._held and time.monotonic() < deadline:
            self._held = self._records(self.consumer.poll(0.1))

    def poll(self, timeout_s: float) -> list[tuple[str, int, Record]]:
        if self.finished:
            self.consumer.commit_async(self.finished)
            self.finished = {}
        if self._held:
            held, self._held = self._held, []
            return held
        return self._records(self.consumer.poll(timeout_s))

    @staticmethod
    def _records(records) -> list[tuple[str, int, Record]]:
        return [
            (r.topic, r.partition, Record(r.offset, r.timestamp, r.key, r.value, r.headers))
            for r in records
        ]

    def done(self, topic: str, partition: int, offset: int) -> None:
        self.finished[(topic, partition)] = offset + 1

    def on_partitions_revoked(self, partitions) -> None:
        revoked = {tp: o for tp, o in self.finished.items() if tp in partitions}
        if revoked:
            self.consumer.commit(revoked)
        for tp in revoked:
            del self.finished[tp]

    def on_partitions_lost(self, partitions) -> None:
        """Another member may own them already: what was finished is read again there."""
        for tp in partitions:
            self.finished.pop(tp, None)

    def close(self) -> None:
        try:
            if self.finished:
                finished, self.finished = self.finished, {}
                self.consumer.commit(finished)
        finally:
            self.consumer.close(autocommit=False)
