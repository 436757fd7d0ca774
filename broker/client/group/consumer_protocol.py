"""The consumer protocol as the group consumer uses it: typed subscriptions and
assignments over the byte formats declared once in `broker.protocol.consumer_protocol`
(which the coordinator and the group tools read too).

Members the leader leaves out of its SyncGroup get zero bytes from Kafka: read as an
empty assignment, as librdkafka does.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from broker.cluster import TopicPartition
from broker.protocol import consumer_protocol as wire

PROTOCOL_TYPE = "consumer"
NEWEST_VERSION = wire.MAX_VERSION  # the version we write


@dataclass
class Subscription:
    """One member's subscription. `member_id` and `group_instance_id` are not in its
    bytes: JoinGroup's member list carries them, and assignors order members by them."""

    topics: list[str]
    user_data: bytes | None = None
    owned_partitions: list[TopicPartition] = field(default_factory=list)
    generation_id: int = -1
    rack_id: str | None = None
    version: int = NEWEST_VERSION
    member_id: str = ""
    group_instance_id: str | None = None


@dataclass
class Assignment:
    partitions: list[TopicPartition]
    user_data: bytes | None = None
    version: int = NEWEST_VERSION


def group_by_topic(partitions) -> list[dict]:
    """[(topic, partition)] -> [{topic, partitions}], in the order given (so decoding and
    encoding again gives the same bytes)."""
    by_topic: dict[str, list[int]] = {}
    for topic, partition in partitions:
        by_topic.setdefault(topic, []).append(partition)
    return [{"topic": t, "partitions": ps} for t, ps in by_topic.items()]


def flatten(grouped: list[dict]) -> list[TopicPartition]:
    return [TopicPartition(t["topic"], p) for t in grouped for p in t["partitions"]]


def encode_subscription(sub: Subscription) -> bytes:
    body = {
        "topics": list(sub.topics),
        "user_data": sub.user_data,
        "owned_partitions": group_by_topic(sub.owned_partitions),
        "generation_id": sub.generation_id,
        "rack_id": sub.rack_id,
    }
    return wire.encode_subscription(body, sub.version)


def decode_subscription(data: bytes | memoryview) -> Subscription:
    """DecodeError for bytes that are not a subscription."""
    version, body = wire.decode_subscription(data)
    return Subscription(
        topics=body["topics"],
        user_data=body["user_data"],
        owned_partitions=flatten(body["owned_partitions"]),
        generation_id=body["generation_id"],
        rack_id=body["rack_id"],
        version=version,
    )


def encode_assignment(assignment: Assignment) -> bytes:
    body = {
        "assigned_partitions": group_by_topic(assignment.partitions),
        "user_data": assignment.user_data,
    }
    return wire.encode_assignment(body, assignment.version)


def decode_assignment(data: bytes | memoryview | None) -> Assignment:
    if not data:
        return Assignment([], None, 0)
    version, body = wire.decode_assignment(data)
    return Assignment(flatten(body["assigned_partitions"]), body["user_data"], version)
