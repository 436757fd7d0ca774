"""Records for poll(): fetches from each assigned partition's position (through
SimpleConsumer.fetch_many, which follows leaders and retries), keeps what one poll()
may not return (max.poll.records) for the next, and moves positions as records are
handed out.

A buffer holds the position it continues from; a seek or a rebalance that moves the
position makes it stale and it is dropped. Once a partition's buffered records are all
returned its position jumps to the fetch's next offset, which steps over control
batches and offsets removed by compaction.

A fetch asks for at most `max.partition.fetch.bytes` of each partition and
`fetch.max.bytes` in all; the broker fills the answer in request order
(docs/contracts/fetch.md, "Size limits"). As Kafka's consumer does, a partition that
returned records goes to the back of the next request, so one left out when an answer
was full comes first later on and is not starved. A partition whose answer holds no
complete batch (a batch cut short at the end) is simply asked again.
"""

from __future__ import annotations

import itertools
from collections import deque
from typing import NamedTuple

from broker.client.group.subscription import SubscriptionState
from broker.client.simple_consumer import FetchRequest, FetchResult, SimpleConsumer
from broker.cluster import TopicPartition
from broker.protocol.errors import ErrorCode, retriable
from broker.records.batch import iter_batches


class ConsumerRecord(NamedTuple):
    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]
    leader_epoch: int  # of the batch it came in (-1 if unknown)


class _Buffer:
    __slots__ = ("records", "position", "next_offset")

    def __init__(self, records: deque, position: int, next_offset: int):
        self.records = records
        self.position = position  # where the next record handed out continues from
        self.next_offset = next_offset


def records_of(result: FetchResult) -> list[ConsumerRecord]:
    """The data records of a fetch result with their batches' leader epochs."""
    ends = [
        (h.next_offset, h.partition_leader_epoch) for _, h in iter_batches(result.records_bytes)
    ]
    out = []
    i = 0
    for r in result.records():
        while ends[i][0] <= r.offset:
            i += 1
        out.append(
            ConsumerRecord(
                result.topic,
                result.partition,
                r.offset,
                r.timestamp,
                None if r.key is None else bytes(r.key),
                None if r.value is None else bytes(r.value),
                [(k, None if v is None else bytes(v)) for k, v in r.headers],
                ends[i][1],
            )
        )
    return out


class Fetcher:
    def __init__(self, simple: SimpleConsumer, subscription: SubscriptionState, config: dict):
        self.simple = simple
        self.subscription = subscription
        self.max_partition_bytes: int = config["max.partition.fetch.bytes"]
        self.max_bytes: int = config["fetch.max.bytes"]
        self.min_bytes: int = config["fetch.min.bytes"]
        self._buffers: dict[TopicPartition, _Buffer] = {}
        # When each partition last returned records: the request puts the least recent
        # first (never: 0, in assignment order).
        self._served: dict[TopicPartition, int] = {}
        self._turns = itertools.count(1)

    def drain(self, max_records: int) -> list[ConsumerRecord]:
        """Buffered records of assigned partitions, at most `max_records`."""
        out: list[ConsumerRecord] = []
        for tp in list(self._buffers):
            buf = self._buffers[tp]
            state = self.subscription.assignment.get(tp)
            if state is None or state.position != buf.position:
                del self._buffers[tp]  # revoked, or sought elsewhere
                continue
            while buf.records and len(out) < max_records:
                record = buf.records.popleft()
                out.append(record)
                buf.position = state.position = record.offset + 1
                state.leader_epoch = record.leader_epoch
            if not buf.records:
                state.position = max(state.position, buf.next_offset)
                del self._buffers[tp]
            if len(out) >= max_records:
                break
        return out

    def fetch(self, max_wait_ms: int, retry_for_s: float) -> list[TopicPartition]:
        """One fetch for every assigned partition with a position and nothing buffered.
        Returns the partitions whose position is out of range (to be reset). Raises the
        error of a partition that retrying cannot fix."""
        wanted = [
            (tp, state)
            for tp, state in self.subscription.assignment.items()
            if state.position is not None and tp not in self._buffers
        ]
        wanted.sort(key=lambda item: self._served.get(item[0], 0))
        requests = [
            FetchRequest(tp.topic, tp.partition, state.position, self.max_partition_bytes)
            for tp, state in wanted
        ]
        if not requests:
            return []
        results = self.simple.fetch_many(
            requests, max_wait_ms, self.min_bytes, retry_for_s, max_bytes=self.max_bytes
        )
        out_of_range = []
        for (topic, partition), result in results.items():
            tp = TopicPartition(topic, partition)
            state = self.subscription.assignment.get(tp)
            if state is None or state.position != result.fetch_offset:
                continue
            if result.error == ErrorCode.OFFSET_OUT_OF_RANGE:
                out_of_range.append(tp)
            elif result.error == ErrorCode.NONE:
                records = records_of(result)
                if result.next_offset > result.fetch_offset:
                    self._served[tp] = next(self._turns)
                if records or result.next_offset > state.position:
                    self._buffers[tp] = _Buffer(deque(records), state.position, result.next_offset)
            elif not (
                retriable(result.error) or result.error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            ):
                result.raise_for_error()
            # Retriable errors left after fetch_many's retries: try again next poll().
        return out_of_range

    def forget(self, tp: TopicPartition) -> None:
        self._buffers.pop(tp, None)
        self._served.pop(tp, None)
