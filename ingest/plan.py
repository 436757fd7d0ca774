"""Planning a run, driver side: which topics, which partitions, which offset ranges.

Each partition gets [first, next): first is where the previous committed run stopped
(or earliest/latest for a partition never loaded), next is the high watermark capped by
the per-run record limit -- at read_committed (`kafka.isolation.level`, the default) the
last stable offset: the consumer's ListOffsets carries the isolation level, so `latest`
stops before the first transaction still open, whose records may yet be aborted; the
next run loads them once their transaction ends. A stored offset below the log start is a gap: offsets deleted
by retention before anyone loaded them. It is recorded (manifest, audit), and loading
continues from the log start -- or the run fails, if so configured.

As Camus did, a task is one (leader, topic, partition) range: the leader is the
partition's leader in the metadata at planning time. Tasks are ordered so that leaders
take turns (see split_tasks), and the leader goes into the manifest beside the brokers
the range was actually read from. A task never relies on it: its fetch API follows the
partition to whichever broker leads it when it reads, so a leader that moves (a broker
killed or stopped) moves the reads, and the offsets read stay exactly [start, end).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import zip_longest

from broker.client.simple_consumer import SimpleConsumer
from broker.protocol.errors import UnknownTopicOrPartitionError


class GapError(RuntimeError):
    """A partition lost offsets to retention and offsets.on.gap is `fail`."""


@dataclass(frozen=True)
class PartitionRange:
    topic: str
    partition: int
    first: int
    next: int
    earliest: int  # log start at planning time
    latest: int  # high watermark at planning time (read_committed: last stable offset)
    gap: tuple[int, int] | None = None  # [from, to) lost to retention
    leader: int = -1  # the partition's leader at planning time; -1: none then

    @property
    def size(self) -> int:
        return self.next - self.first


@dataclass(frozen=True)
class TaskSpec:
    """One Spark task: [start, end) of one partition, planned on broker `leader`. A range
    larger than the per-task limit becomes several tasks, numbered by `index`."""

    topic: str
    partition: int
    start: int
    end: int
    index: int = 0
    leader: int = -1

    @property
    def name(self) -> str:
        return f"{self.topic}+{self.partition}+{self.start}"


def select_topics(topics: Iterable[str], whitelist: list[str], blacklist: list[str]) -> list[str]:
    allow = [re.compile(p) for p in whitelist]
    deny = [re.compile(p) for p in blacklist]
    return sorted(
        t
        for t in topics
        if any(p.fullmatch(t) for p in allow) and not any(p.fullmatch(t) for p in deny)
    )


def plan_ranges(
    consumer: SimpleConsumer,
    topics: list[str],
    stored: dict[tuple[str, int], int],
    *,
    new_partition_start: str = "earliest",
    on_gap: str = "continue",
    max_records_per_partition: int,
) -> list[PartitionRange]:
    """The range of every partition of `topics` (empty ranges included, so the manifest
    carries every partition's offset forward)."""
    consumer.cluster.refresh(topics)
    ranges = []
    for topic in topics:
        for partition in consumer.partitions_for(topic):
            earliest = consumer.earliest_offset(topic, partition)
            latest = consumer.latest_offset(topic, partition)
            start = stored.get((topic, partition))
            gap = None
            if start is None:
                start = earliest if new_partition_start == "earliest" else latest
            elif start < earliest:
                if on_gap == "fail":
                    raise GapError(
                        f"{topic}-{partition}: offsets [{start}, {earliest}) were deleted by retention "
                        "before they were loaded (offsets.on.gap=fail)"
                    )
                gap = (start, earliest)
                start = earliest
            elif start > latest:
                # The partition's log was truncated or recreated below what we stored.
                raise GapError(
                    f"{topic}-{partition}: stored offset {start} is past the high watermark {latest}; "
                    "the topic was recreated or truncated -- rerun with an explicit range"
                )
            end = min(latest, start + max_records_per_partition)
            leader = current_leader(consumer, topic, partition)
            ranges.append(
                PartitionRange(topic, partition, start, end, earliest, latest, gap, leader)
            )
    return ranges


def current_leader(consumer: SimpleConsumer, topic: str, partition: int) -> int:
    """The partition's leader in the consumer's metadata; -1 while it has none, or when the
    metadata does not know the partition (a task reading it then says why)."""
    try:
        leader = consumer.cluster.partition(topic, partition).leader
    except UnknownTopicOrPartitionError:
        return -1
    return leader if leader in consumer.cluster.brokers else -1


def split_tasks(ranges: list[PartitionRange], max_records_per_task: int) -> list[TaskSpec]:
    """The tasks of `ranges`, at most `max_records_per_task` offsets each, in the order
    Spark should start them.

    Spark starts tasks in order as executors free up. Largest first, so long tasks do not
    straggle at the end; and leaders take turns (each round has the next largest task of
    every leader, the largest leader first), so the tasks running at any moment read from
    as many brokers as there are, rather than all from the broker with the most data.
    """
    by_leader: dict[int, list[TaskSpec]] = defaultdict(list)
    for r in ranges:
        start, index = r.first, 0
        while start < r.next:
            end = min(r.next, start + max_records_per_task)
            by_leader[r.leader].append(TaskSpec(r.topic, r.partition, start, end, index, r.leader))
            start, index = end, index + 1
    queues = sorted(
        (sorted(tasks, key=_size, reverse=True) for tasks in by_leader.values()),
        key=lambda tasks: _size(tasks[0]),
        reverse=True,
    )
    return [
        task
        for turn in zip_longest(*queues)
        for task in sorted((t for t in turn if t is not None), key=_size, reverse=True)
    ]


def _size(task: TaskSpec) -> int:
    return task.end - task.start
