"""A group's state as seen from outside, through real clients, for the tests against real
brokers: its coordinator (FindCoordinator), its committed offsets (confluent-kafka's admin
client), its partitions' log end offsets, and its metadata records in `__consumer_offsets` (each rebalance, and each static
member's return, writes one: the generation, the leader, every member and its assignment).
"""

from __future__ import annotations

import time

from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import AdminClient

from broker.client.connection import BrokerConnection
from broker.coordinator.offsets_topic import (
    OFFSETS_TOPIC,
    GroupKey,
    decode_group_value,
    decode_key,
    partition_for,
)
from broker.protocol.apis import FIND_COORDINATOR
from tests.helpers.cluster import wait_for


def connect(address: str, client_id: str = "group-tests") -> BrokerConnection:
    """A raw connection to the broker at `address` (host:port)."""
    host, port = address.rsplit(":", 1)
    return BrokerConnection(host, int(port), client_id=client_id)


def coordinator_of(address: str, group: str) -> int | None:
    """The broker id the broker at `address` names as `group`'s coordinator; None while it
    has none (COORDINATOR_NOT_AVAILABLE, ...)."""
    with connect(address) as conn:
        answer = conn.request(FIND_COORDINATOR, {"key": group, "key_type": 0}, 2)
    return answer["node_id"] if answer["error_code"] == 0 else None


def committed_offsets(bootstrap: str, group: str) -> dict[tuple[str, int], int]:
    """Every offset the group has committed, (topic, partition) -> offset."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    future = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group]
    return {(tp.topic, tp.partition): tp.offset for tp in future.result(30).topic_partitions}


def end_offsets(bootstrap: str, topic: str, partitions: int) -> dict[tuple[str, int], int]:
    """Each partition's high watermark."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "end-offsets"})
    try:
        return {
            (topic, p): consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
            for p in range(partitions)
        }
    finally:
        consumer.close()


def wait_committed_to_end(
    bootstrap: str, group: str, topic: str, partitions: int
) -> dict[tuple[str, int], int]:
    """Until the group's committed offsets are the partitions' ends (as they are now:
    call it once writing has stopped); returns those ends."""
    ends = end_offsets(bootstrap, topic, partitions)
    wait_for(lambda: committed_offsets(bootstrap, group) == ends, f"{group} committed to the end")
    return ends


def group_records(bootstrap: str, group: str) -> list[dict | None]:
    """The group's metadata records in `__consumer_offsets`, oldest first (None: a
    tombstone), each as its value's fields (generation, leader, members, ...); read up to
    the partition's end as it was when asked (members committing keep appending to it)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = admin.list_topics(OFFSETS_TOPIC, timeout=10).topics[OFFSETS_TOPIC]
    tp = TopicPartition(OFFSETS_TOPIC, partition_for(group, len(topic.partitions)), 0)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "read-offsets-topic"})
    found: list[dict | None] = []
    try:
        _, end = consumer.get_watermark_offsets(tp, timeout=10)
        consumer.assign([tp])
        position = 0
        deadline = time.monotonic() + 30
        while position < end:
            assert time.monotonic() < deadline, f"{OFFSETS_TOPIC} not read to {end}"
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            assert not msg.error(), msg.error()
            position = msg.offset() + 1
            if decode_key(msg.key()) == GroupKey(group):
                found.append(None if msg.value() is None else decode_group_value(msg.value()))
    finally:
        consumer.close()
    return found
