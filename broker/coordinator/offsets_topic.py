"""The offsets topic: its name, which of its partitions holds a group, its record formats.

`__consumer_offsets` keeps committed offsets and group metadata as records in Kafka's own
layouts (docs/contracts/consumer-groups.md), so Kafka's tools could read the topic and compaction
keeps the latest of each: a key starts with an int16 telling what it is (0 or 1: an
offset commit of group/topic/partition, 2: a group's metadata), a value with an int16
version of its layout; a null value (tombstone) deletes what the key names. The layouts
are declared as data, as the APIs are (facts from apache/kafka's `OffsetCommitKey`,
`OffsetCommitValue`, `GroupMetadataKey` and `GroupMetadataValue` message JSON).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from broker.protocol.codec import compile_struct
from broker.protocol.types import (
    BYTES,
    INT32,
    INT64,
    STRING,
    Array,
    DecodeError,
    Reader,
    Struct,
    Writer,
)
from broker.protocol.types import Field as F

OFFSETS_TOPIC = "__consumer_offsets"


def java_string_hash(text: str) -> int:
    """Java's String.hashCode: over UTF-16 code units, wrapped to a signed int32."""
    units = text.encode("utf-16-be")
    h = 0
    for (unit,) in struct.iter_unpack(">H", units):
        h = (31 * h + unit) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for(group_id: str, partitions: int) -> int:
    """The offsets partition of a group, as Kafka computes it (its `Utils.abs` maps
    Integer.MIN_VALUE to 0), so a group lands where Kafka would put it."""
    h = java_string_hash(group_id)
    return (0 if h == -(1 << 31) else abs(h)) % partitions


# fmt: off
_OFFSET_KEY = Struct(
    F("group", STRING),
    F("topic", STRING),
    F("partition", INT32),
)
_GROUP_KEY = Struct(
    F("group", STRING),
)
_OFFSET_VALUE = Struct(
    F("offset", INT64),
    F("leader_epoch", INT32, "3+", default=-1),
    F("metadata", STRING),
    F("commit_timestamp", INT64),
    F("expire_timestamp", INT64, "1", default=-1),
)
_GROUP_VALUE = Struct(
    F("protocol_type", STRING),
    F("generation", INT32),
    F("protocol", STRING, nullable="0+"),
    F("leader", STRING, nullable="0+"),
    F("current_state_timestamp", INT64, "2+", default=-1),
    F("members", Array(Struct(
        F("member_id", STRING),
        F("group_instance_id", STRING, "3+", nullable="3+", default=None),
        F("client_id", STRING),
        F("client_host", STRING),
        F("rebalance_timeout", INT32, "1+", default=-1),
        F("session_timeout", INT32),
        F("subscription", BYTES),
        F("assignment", BYTES),
    ))),
)
# fmt: on

OFFSET_KEY_VERSION = 1
GROUP_KEY_VERSION = 2
_VALUE_VERSIONS = range(0, 5)  # v4 is the first flexible one
_FLEXIBLE_FROM = 4


@dataclass(frozen=True)
class OffsetKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True)
class GroupKey:
    group: str


@dataclass(frozen=True)
class CommittedOffset:
    """What a commit stored for one partition of a group."""

    offset: int
    leader_epoch: int  # -1: unknown
    metadata: str
    commit_timestamp_ms: int
    # Set only by commits that asked for a retention time (OffsetCommit v2-v4).
    expire_timestamp_ms: int | None = None


def _encode(s: Struct, version: int, value: dict) -> bytes:
    w = Writer()
    w.int16(version)
    compile_struct(s, version, version >= _FLEXIBLE_FROM).encode(w, value)
    return w.getvalue()


def encode_offset_key(group: str, topic: str, partition: int) -> bytes:
    return _encode(
        _OFFSET_KEY, OFFSET_KEY_VERSION, {"group": group, "topic": topic, "partition": partition}
    )


def encode_group_key(group: str) -> bytes:
    return _encode(_GROUP_KEY, GROUP_KEY_VERSION, {"group": group})


def encode_offset_value(committed: CommittedOffset) -> bytes:
    # v1 is the only layout with an expiry; without one, v3 (with the leader epoch), as
    # Kafka writes them.
    version = 1 if committed.expire_timestamp_ms is not None else 3
    return _encode(
        _OFFSET_VALUE,
        version,
        {
            "offset": committed.offset,
            "leader_epoch": committed.leader_epoch,
            "metadata": committed.metadata,
            "commit_timestamp": committed.commit_timestamp_ms,
            "expire_timestamp": committed.expire_timestamp_ms or -1,
        },
    )


GROUP_VALUE_VERSION = 3


def encode_group_value(value: dict) -> bytes:
    """A group's metadata (keys as declared in `_GROUP_VALUE`), in layout v3."""
    return _encode(_GROUP_VALUE, GROUP_VALUE_VERSION, value)


def decode_key(data: bytes) -> OffsetKey | GroupKey:
    """The key of an offsets-topic record; DecodeError for anything else."""
    r = Reader(data)
    version = r.int16()
    if version in (0, 1):
        k = compile_struct(_OFFSET_KEY, version, False).decode(r)
        return OffsetKey(k["group"], k["topic"], k["partition"])
    if version == GROUP_KEY_VERSION:
        return GroupKey(compile_struct(_GROUP_KEY, version, False).decode(r)["group"])
    raise DecodeError(f"unknown offsets-topic key version {version}")


def _decode_value(s: Struct, data: bytes) -> tuple[int, dict]:
    r = Reader(data)
    version = r.int16()
    if version not in _VALUE_VERSIONS:
        raise DecodeError(f"unknown offsets-topic value version {version}")
    return version, compile_struct(s, version, version >= _FLEXIBLE_FROM).decode(r)


def decode_offset_value(data: bytes) -> CommittedOffset:
    version, v = _decode_value(_OFFSET_VALUE, data)
    return CommittedOffset(
        v["offset"],
        v["leader_epoch"],
        v["metadata"],
        v["commit_timestamp"],
        v["expire_timestamp"] if version == 1 else None,
    )


def decode_group_value(data: bytes) -> dict:
    return _decode_value(_GROUP_VALUE, data)[1]
