"""The consumer protocol: the bytes consumers exchange through a group coordinator.

A consumer's JoinGroup metadata is a *subscription* and the leader's SyncGroup hands each
member an *assignment*; the broker relays both as opaque bytes (docs/contracts/
consumer-groups.md) except that it reads the topics of subscriptions (offset expiration,
OffsetDelete). Declared here once, as data, for the coordinator, our group consumer and
the group tools (facts from apache/kafka's ConsumerProtocolSubscription.json and
ConsumerProtocolAssignment.json). Both start with an int16 version; later versions only
add fields at the end, so a newer version decodes as the newest we know (as Kafka does).
"""

from __future__ import annotations

from broker.protocol.codec import compile_struct
from broker.protocol.types import BYTES, INT32, STRING, Array, DecodeError, Reader, Struct, Writer
from broker.protocol.types import Field as F

# fmt: off
_TOPIC_PARTITIONS = Array(Struct(
    F("topic", STRING),
    F("partitions", Array(INT32)),
))

SUBSCRIPTION = Struct(
    F("topics", Array(STRING)),
    F("user_data", BYTES, nullable="0+", default=None),
    F("owned_partitions", _TOPIC_PARTITIONS, "1+"),
    F("generation_id", INT32, "2+", default=-1),
    F("rack_id", STRING, "3+", nullable="3+", default=None),
)

ASSIGNMENT = Struct(
    F("assigned_partitions", _TOPIC_PARTITIONS),
    F("user_data", BYTES, nullable="0+", default=None),
)
# fmt: on

MAX_VERSION = 3


def _encode(s: Struct, value: dict, version: int) -> bytes:
    if not 0 <= version <= MAX_VERSION:
        raise ValueError(f"consumer protocol version {version} is not 0-{MAX_VERSION}")
    w = Writer()
    w.int16(version)
    compile_struct(s, version, False).encode(w, value)
    return w.getvalue()


def _decode(s: Struct, data: bytes) -> tuple[int, dict]:
    r = Reader(data)
    version = r.int16()
    if version < 0:
        raise DecodeError(f"consumer protocol version {version}")
    return version, compile_struct(s, min(version, MAX_VERSION), False).decode(r)


def encode_subscription(value: dict, version: int = 0) -> bytes:
    """`value` keyed as SUBSCRIPTION (missing fields take their defaults)."""
    return _encode(SUBSCRIPTION, value, version)


def decode_subscription(data: bytes) -> tuple[int, dict]:
    """(version, fields); DecodeError for bytes that are not a subscription."""
    return _decode(SUBSCRIPTION, data)


def encode_assignment(value: dict, version: int = 0) -> bytes:
    return _encode(ASSIGNMENT, value, version)


def decode_assignment(data: bytes) -> tuple[int, dict]:
    return _decode(ASSIGNMENT, data)


def subscription_topics(data: bytes) -> set[str]:
    """The topics a subscription names; DecodeError if it is not one."""
    return set(decode_subscription(data)[1]["topics"] or ())
