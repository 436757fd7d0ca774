"""Consumer groups made by real clients, for the tests of the group tools and the admin
client's group API: confluent-kafka members that subscribe, consume and commit, and a
kafka-python member that shows where a group starts reading. (The `group_broker` fixture
in tests/conftest.py is a broker on which they form at once.)"""

from __future__ import annotations

import time
import uuid

from confluent_kafka import Consumer
from kafka import KafkaConsumer

from broker.client.admin import AdminClient, NewTopic
from broker.client.producer import Producer


def fresh(prefix: str) -> str:
    """A topic or group name of the test's own."""
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def topic_with_records(
    bootstrap: str, counts: list[int], prefix: str = "grp", timestamps: list[int] | None = None
) -> str:
    """A new topic with counts[p] records in partition p (values `p-i`); record i of each
    partition gets timestamps[i] if given."""
    topic = fresh(prefix)
    with AdminClient(bootstrap) as admin:
        admin.create_topics([NewTopic(topic, len(counts))], raise_errors=True)
    with Producer(bootstrap, linger_ms=0) as producer:
        futures = [
            producer.send(
                topic,
                f"{p}-{i}".encode(),
                partition=p,
                timestamp_ms=timestamps[i] if timestamps else None,
            )
            for p, n in enumerate(counts)
            for i in range(n)
        ]
        producer.flush(30)
    for f in futures:
        f.result(0)
    return topic


class ConfluentGroup:
    """`members` confluent-kafka consumers subscribed to `topics` in `group`, manual
    commits, the range assignor; each keeps its session itself (librdkafka heartbeats from
    its own thread), so the group stays Stable between polls."""

    def __init__(
        self, bootstrap: str, group: str, topics: list[str], members: int = 2, **config
    ) -> None:
        self.group = group
        self.consumers = [
            Consumer(
                {
                    "bootstrap.servers": bootstrap,
                    "group.id": group,
                    "client.id": f"member-{i}",
                    "auto.offset.reset": "earliest",
                    "enable.auto.commit": False,
                    "partition.assignment.strategy": "range",
                    **config,
                }
            )
            for i in range(members)
        ]
        for c in self.consumers:
            c.subscribe(topics)

    def consume(self, ends: dict[tuple[str, int], int], timeout_s: float = 30.0) -> None:
        """Poll every member until each has an assignment and has read each of its
        partitions to `ends[(topic, partition)]` (a partition read before a rebalance
        moved it is read again by its new owner, so counting records is not enough)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for c in self.consumers:
                c.poll(0.1)
            if all(self._read_to_end(c, ends) for c in self.consumers):
                return
        raise AssertionError(f"group {self.group}: members did not read to {ends} in time")

    @staticmethod
    def _read_to_end(consumer: Consumer, ends: dict[tuple[str, int], int]) -> bool:
        assigned = consumer.assignment()
        return bool(assigned) and all(
            tp.offset == ends[(tp.topic, tp.partition)] for tp in consumer.position(assigned)
        )

    def commit(self) -> None:
        """Each member commits the positions it has consumed to."""
        for c in self.consumers:
            if c.assignment():
                c.commit(asynchronous=False)

    def close(self) -> None:
        """Leave the group (LeaveGroup): the group is Empty once the last one has left."""
        for c in self.consumers:
            c.close()
        self.consumers = []

    def __enter__(self) -> ConfluentGroup:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def first_offsets(
    bootstrap: str, group: str, topic: str, partitions: int, timeout_s: float = 60.0
) -> dict[int, int]:
    """partition -> the offset a kafka-python member of `group` subscribed to `topic`
    reads first: where the group's committed offsets send it (no reset policy, so a
    partition without one fails). The first record's offset, or the position when the
    committed offset is the log end. Commits nothing; leaves the group."""
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=group,
        enable_auto_commit=False,
        auto_offset_reset="none",
    )
    consumer.subscribe([topic])
    first: dict[int, int] = {}
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            # Long polls: kafka-python 3.0.12 loses the assignment of a SyncGroup answer
            # that arrives after a poll() gave up waiting for it (the member stays in the
            # group with nothing assigned); a poll that outlasts the join avoids that.
            for tp, records in consumer.poll(timeout_ms=2000).items():
                first.setdefault(tp.partition, records[0].offset)
            assigned = consumer.assignment()
            if len(assigned) < partitions:
                continue
            ends = consumer.end_offsets(list(assigned))
            unread = [tp for tp in assigned if tp.partition not in first]
            if all(consumer.position(tp) == ends[tp] for tp in unread):
                return first | {tp.partition: ends[tp] for tp in unread}
    finally:
        consumer.close(autocommit=False)
    raise AssertionError(f"kafka-python in {group}: read {first} of {partitions} partitions")
