"""The consumer protocol's bytes: what a member subscribes to and what it is assigned.

A JoinGroup of protocol type "consumer" carries, per assignor, a Subscription; the leader's
SyncGroup carries an Assignment per member. The broker relays both without reading them;
clients (and tools that describe a group) decode them. Facts from apache/kafka's
`ConsumerProtocolSubscription.json` and `ConsumerProtocolAssignment.json`:

- both start with an int16 version, then the struct at that version; neither is flexible;
- Subscription v0: topics, user_data (nullable); v1 adds owned_partitions; v2 generation_id
  (default -1); v3 rack_id (nullable);
- Assignment v0-v3: assigned_partitions, user_data (the same fields in every version);
- a newer version than known is read as the newest known: versions only append fields.

Members the leader leaves out of its SyncGroup get zero bytes from Kafka: read as an
empty assignment, as librdkafka does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from broker.protocol.codec import compile_struct
from broker.protocol.types import (
    BYTES,
    INT32,
    STRING,
    Array,
    DecodeError,
    Reader,
    Struct,
    Writer,
)
from broker.protocol.types import Field as F

PROTOCOL_TYPE = "consumer"

SUBSCRIPTION_VERSION = 3  # the newest version this module knows, and the one we write
ASSIGNMENT_VERSION = 3


class TopicPartition(NamedTuple):
    topic: str
    partition: int


# Lists of partitions travel grouped by topic: [{topic, partitions: [int32]}].
TOPIC_PARTITIONS = Array(Struct(F("topic", STRING), F("partitions", Array(INT32))))

# fmt: off
SUBSCRIPTION = Struct(
    F("topics", Array(STRING)),
    F("user_data", BYTES, nullable="0+", default=None),
    F("owned_partitions", TOPIC_PARTITIONS, "1+"),
    F("generation_id", INT32, "2+", default=-1),
    F("rack_id", STRING, "3+", nullable="3+", default=None),
)

ASSIGNMENT = Struct(
    F("assigned_partitions", TOPIC_PARTITIONS),
    F("user_data", BYTES, nullable="0+", default=None),
)
# fmt: on


@dataclass
class Subscription:
    """One member's subscription. `member_id` and `group_instance_id` are not in these
    bytes: JoinGroup's member list carries them, and assignors order members by them."""

    topics: list[str]
    user_data: bytes | None = None
    owned_partitions: list[TopicPartition] = field(default_factory=list)
    generation_id: int = -1
    rack_id: str | None = None
    version: int = SUBSCRIPTION_VERSION
    member_id: str = ""
    group_instance_id: str | None = None


@dataclass
class Assignment:
    partitions: list[TopicPartition]
    user_data: bytes | None = None
    version: int = ASSIGNMENT_VERSION


def group_by_topic(partitions) -> list[dict]:
    """[(topic, partition)] -> [{topic, partitions}], in the order given (so decoding and
    encoding again gives the same bytes)."""
    by_topic: dict[str, list[int]] = {}
    for topic, partition in partitions:
        by_topic.setdefault(topic, []).append(partition)
    return [{"topic": t, "partitions": ps} for t, ps in by_topic.items()]


def flatten(grouped: list[dict]) -> list[TopicPartition]:
    return [TopicPartition(t["topic"], p) for t in grouped for p in t["partitions"]]


def _encode(struct: Struct, version: int, body: dict) -> bytes:
    w = Writer()
    w.int16(version)
    compile_struct(struct, version, False).encode(w, body)
    return w.getvalue()


def _decode(struct: Struct, newest: int, data: bytes | memoryview, what: str) -> tuple[int, dict]:
    """(version as written, body) of version-prefixed bytes; raises DecodeError."""
    r = Reader(data)
    version = r.int16()
    if version < 0:
        raise DecodeError(f"{what} version {version} is negative")
    # Trailing bytes of a newer version are fields we do not know: skipped.
    return version, compile_struct(struct, min(version, newest), False).decode(r)


def encode_subscription(sub: Subscription) -> bytes:
    if not 0 <= sub.version <= SUBSCRIPTION_VERSION:
        raise ValueError(f"subscription version {sub.version} is not 0-{SUBSCRIPTION_VERSION}")
    body = {
        "topics": list(sub.topics),
        "user_data": sub.user_data,
        "owned_partitions": group_by_topic(sub.owned_partitions),
        "generation_id": sub.generation_id,
        "rack_id": sub.rack_id,
    }
    return _encode(SUBSCRIPTION, sub.version, body)


def decode_subscription(data: bytes | memoryview) -> Subscription:
    version, body = _decode(SUBSCRIPTION, SUBSCRIPTION_VERSION, data, "subscription")
    return Subscription(
        topics=body["topics"],
        user_data=body["user_data"],
        owned_partitions=flatten(body["owned_partitions"]),
        generation_id=body["generation_id"],
        rack_id=body["rack_id"],
        version=version,
    )


def encode_assignment(assignment: Assignment) -> bytes:
    if not 0 <= assignment.version <= ASSIGNMENT_VERSION:
        raise ValueError(f"assignment version {assignment.version} is not 0-{ASSIGNMENT_VERSION}")
    body = {
        "assigned_partitions": group_by_topic(assignment.partitions),
        "user_data": assignment.user_data,
    }
    return _encode(ASSIGNMENT, assignment.version, body)


def decode_assignment(data: bytes | memoryview | None) -> Assignment:
    if not data:
        return Assignment([], None, 0)
    version, body = _decode(ASSIGNMENT, ASSIGNMENT_VERSION, data, "assignment")
    return Assignment(flatten(body["assigned_partitions"]), body["user_data"], version)
