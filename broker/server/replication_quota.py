"""Replication throttles (Kafka's KIP-73): a reassignment's new replicas copy a partition
at a bounded rate, so moving data does not starve producers and consumers.

Which replicas are throttled is a topic's business: `leader.replication.throttled.replicas`
and `follower.replication.throttled.replicas` list `partition:broker` pairs (or `*`, every
replica); a broker throttles a partition when a pair names it with this broker's id (on
the leader side for the fetches it serves, on the follower side for those it sends). The
rates are the brokers' (`leader.replication.throttled.rate`,
`follower.replication.throttled.rate`, bytes per second, dynamic). A replica in the ISR is
never throttled: only catching-up replicas are slowed, never what acks=all waits for.

The rate is measured as Kafka measures it: bytes of throttled partitions over the last
`WINDOWS` one-second windows; over the rate, throttled partitions are left out of the
next fetch (follower) or answered with no records (leader) until the rate falls below.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable

ALL_REPLICAS = "*"
WINDOWS = 11  # Kafka's replication.quota.window.num, of 1 s each
LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"
LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"
UNLIMITED = 2**63 - 1


def throttled_replicas_problem(entries) -> str | None:
    """What is wrong with a `*.replication.throttled.replicas` list, or None."""
    entries = [e.strip() for e in entries or [] if e.strip()]
    if entries == [ALL_REPLICAS]:
        return None
    for entry in entries:
        partition, sep, broker = entry.partition(":")
        if not sep or not partition.isdigit() or not broker.isdigit():
            return (
                f"{entry!r} is not PARTITION:BROKER: the value must be '*' or a list "
                "such as 0:101,0:102,1:101"
            )
    return None


def is_throttled(entries, partition: int, broker_id: int) -> bool:
    entries = [e.strip() for e in entries or []]
    return ALL_REPLICAS in entries or f"{partition}:{broker_id}" in entries


class ReplicationQuota:
    """Bytes of throttled replication over the last WINDOWS seconds against a rate read
    afresh each time (the rate is a dynamic broker config)."""

    def __init__(self, rate: Callable[[], int], clock: Callable[[], float] = time.monotonic):
        self.rate = rate
        self.clock = clock
        self._samples: deque[tuple[int, int]] = deque()  # (second, bytes)

    def record(self, nbytes: int) -> None:
        if nbytes <= 0:
            return
        second = int(self.clock())
        if self._samples and self._samples[-1][0] == second:
            self._samples[-1] = (second, self._samples[-1][1] + nbytes)
        else:
            self._samples.append((second, nbytes))
        self._forget(second)

    def exceeded(self) -> bool:
        rate = self.rate()
        if rate >= UNLIMITED:
            return False
        now = self.clock()
        self._forget(int(now))
        if not self._samples:
            return False
        # Over the windows seen so far (at least one second), as Kafka's rate does.
        span = max(1.0, min(float(WINDOWS), now - self._samples[0][0]))
        return sum(n for _, n in self._samples) / span > rate

    def _forget(self, second: int) -> None:
        while self._samples and self._samples[0][0] <= second - WINDOWS:
            self._samples.popleft()
