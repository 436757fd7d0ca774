"""MirrorMaker, Kafka's original design: a group consumer on the source cluster, an
idempotent acks=all producer on the target, and offsets committed only for records the
target has acknowledged.

It reads the source at read_committed: the target's producer is not transactional, so a
record copied from an aborted (or still open) transaction would become an ordinary,
visible record at the target. Only committed and non-transactional records are copied;
transaction markers are never records (docs/contracts/transactions.md).

Each record keeps its key, value, headers and CreateTime; it goes to the same partition
number when the target topic has as many partitions as the source topic, else the
target's producer partitions it (by key). Several instances with the same `group.id`
share the source partitions through the group; the group's lag (the consumer-groups
tool) is how far the mirror is behind.

At-least-once: after a crash, a restarted mirror resumes from the last committed offsets,
so records mirrored after that commit are written again (at most one commit interval's
worth, plus what was in flight); nothing acknowledged by the source is skipped, because
an offset is committed only once every record before it in its partition was
acknowledged by the target. A send that fails stops the mirror (`abort.on.send.failure`,
as Kafka's) rather than commit past it.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future

from broker.client.group import GroupConsumer, RebalanceListener
from broker.client.producer import Producer
from broker.config.definition import ConfigDef, at_least

log = logging.getLogger(__name__)

MIRROR_CONFIG = (
    ConfigDef("MirrorMaker (python -m broker.tools mirror-maker)")
    .define(
        "whitelist",
        "string",
        None,
        "A regular expression: the source topics to mirror (matched in full, as Kafka's "
        "`--whitelist`; re-evaluated as topics appear).",
    )
    .define(
        "offset.commit.interval.ms",
        "int",
        60000,
        "How often the source offsets of acknowledged records are committed; a restart "
        "mirrors again at most what was acknowledged since.",
        validator=at_least(0),
    )
    .define(
        "abort.on.send.failure",
        "boolean",
        True,
        "Stop when the target refuses a record (after the producer's retries), instead of "
        "skipping it. Only `true` is supported: a mirror that skips loses records.",
    )
)


class MirrorError(Exception):
    """The mirror stopped: a record could not be written to the target."""


class MirrorMaker:
    """Mirror topics matching `whitelist` from `consumer`'s cluster to `producer`'s. The
    consumer must be a GroupConsumer with a group id, auto commit off and read_committed;
    the producer idempotent with acks=all (the tool makes them so)."""

    def __init__(
        self,
        consumer: GroupConsumer,
        producer: Producer,
        whitelist: str,
        commit_interval_ms: int = 60000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if consumer.config["enable.auto.commit"]:
            raise ValueError(
                "MirrorMaker commits itself: the consumer needs enable.auto.commit=false"
            )
        if consumer.config["isolation.level"] != "read_committed":
            raise ValueError(
                "MirrorMaker copies committed records only: the consumer needs "
                "isolation.level=read_committed"
            )
        if producer.acks != -1 or not producer.idempotent:
            raise ValueError("MirrorMaker needs an idempotent producer with acks=all")
        self.consumer = consumer
        self.producer = producer
        self.pattern = re.compile(whitelist)
        self.commit_interval_s = commit_interval_ms / 1000
        self.clock = clock
        # Per source partition: (offset, future) of records sent, oldest first.
        self._in_flight: dict[tuple[str, int], deque[tuple[int, Future]]] = {}
        # Per source partition: the next offset whose predecessors are all acknowledged.
        self._acknowledged: dict[tuple[str, int], int] = {}
        self._committed: dict[tuple[str, int], int] = {}
        self._same_partitions: dict[str, bool] = {}
        self._next_commit = clock() + self.commit_interval_s
        self.mirrored = 0  # records sent to the target (for the summary)
        self.resumed_at: dict[tuple[str, int], int] = {}  # where each assignment started

    # -- running ----------------------------------------------------------------------------
    def run(self, stop: threading.Event, poll_timeout_s: float = 0.5) -> None:
        """Mirror until `stop` is set, then flush, commit and leave the group."""
        self.consumer.subscribe(pattern=self.pattern, listener=_Listener(self))
        try:
            while not stop.is_set():
                self.step(poll_timeout_s)
            self.producer.flush()
            self.commit()
        finally:
            self.consumer.close(autocommit=False)

    def step(self, poll_timeout_s: float = 0.5) -> int:
        """One poll: send what came, commit when the interval has passed. Returns how many
        records were sent."""
        records = self.consumer.poll(poll_timeout_s)
        for record in records:
            tp = (record.topic, record.partition)
            self.resumed_at.setdefault(tp, record.offset)
            future = self.producer.send(
                record.topic,
                record.value,
                key=record.key,
                partition=record.partition if self._keeps_partitions(record.topic) else None,
                timestamp_ms=record.timestamp,
                headers=list(record.headers),
            )
            self._in_flight.setdefault(tp, deque()).append((record.offset, future))
        self.mirrored += len(records)
        if self.clock() >= self._next_commit:
            self.commit_async()
        return len(records)

    def _keeps_partitions(self, topic: str) -> bool:
        known = self._same_partitions.get(topic)
        if known is None:
            source = len(self.consumer.cluster.partitions_for(topic))
            target = self.producer.partitions_for(topic)
            known = self._same_partitions[topic] = source == target
            if not known:
                log.warning(
                    "%s: %d partitions at the source, %d at the target: records are "
                    "partitioned by the target's producer",
                    topic,
                    source,
                    target,
                )
        return known

    # -- offsets ----------------------------------------------------------------------------
    def acknowledged(self) -> dict[tuple[str, int], int]:
        """Per source partition, the offset to commit: every record before it has been
        acknowledged by the target. Raises MirrorError when a send failed."""
        for tp, sent in self._in_flight.items():
            while sent and sent[0][1].done():
                offset, future = sent.popleft()
                error = future.exception()
                if error is not None:
                    raise MirrorError(
                        f"{tp[0]}-{tp[1]} offset {offset} could not be written to the target: "
                        f"{error}"
                    ) from error
                self._acknowledged[tp] = offset + 1
        return dict(self._acknowledged)

    def commit(self, partitions=None) -> None:
        """Commit, and wait for, the acknowledged offsets (of `partitions`, or all)."""
        offsets = self._to_commit(partitions)
        if offsets:
            self.consumer.commit(offsets)
            self._committed.update(offsets)
        self._next_commit = self.clock() + self.commit_interval_s

    def commit_async(self) -> None:
        offsets = self._to_commit(None)
        if offsets:
            self.consumer.commit_async(offsets, self._committed_async)
        self._next_commit = self.clock() + self.commit_interval_s

    def _committed_async(self, offsets, error) -> None:
        if error is None:
            self._committed.update({(tp[0], tp[1]): o.offset for tp, o in offsets.items()})
        else:  # the next commit carries these offsets again
            log.warning("offset commit failed: %s", error)

    def _to_commit(self, partitions) -> dict[tuple[str, int], int]:
        acknowledged = self.acknowledged()
        wanted = (
            acknowledged
            if partitions is None
            else {tp: acknowledged[tp] for tp in partitions if tp in acknowledged}
        )
        return {tp: o for tp, o in wanted.items() if self._committed.get(tp) != o}

    def revoked(self, partitions) -> None:
        """Partitions leave this mirror: everything sent for them is flushed and
        committed first, so the next owner starts exactly after it."""
        partitions = {(tp[0], tp[1]) for tp in partitions}
        self.producer.flush()
        self.commit(partitions)
        self.lost(partitions)

    def lost(self, partitions) -> None:
        """Partitions taken away without a chance to commit (the member was removed): what
        this mirror tracked of them goes."""
        for tp in {(tp[0], tp[1]) for tp in partitions}:
            for tracked in (self._in_flight, self._acknowledged, self._committed, self.resumed_at):
                tracked.pop(tp, None)


class _Listener(RebalanceListener):
    def __init__(self, mirror: MirrorMaker) -> None:
        self.mirror = mirror

    def on_partitions_revoked(self, partitions) -> None:
        self.mirror.revoked(partitions)

    def on_partitions_lost(self, partitions) -> None:
        self.mirror.lost(partitions)
