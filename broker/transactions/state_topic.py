"""The transaction state topic: its name, which partition holds a transactional id, its records.

`__transaction_state` keeps the latest metadata of every transactional id as one record
per change, in Kafka's own layouts (docs/contracts/transactions.md), so Kafka's tools read
the topic and compaction keeps the latest per id: the key is an int16 version (0) and the
transactional id, the value an int16 version and Kafka's `TransactionLogValue` (v1 is
flexible, with tagged fields); a null value (tombstone) removes an expired id. The
layouts are declared as data, as the APIs are (facts from apache/kafka's
`TransactionLogKey` and `TransactionLogValue` message JSON).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from broker.coordinator.offsets_topic import partition_for as _hash_partition
from broker.protocol.codec import compile_struct
from broker.protocol.types import (
    INT8,
    INT16,
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
from broker.transactions.state import NO_PRODUCER_EPOCH, NO_PRODUCER_ID, TxnState, TxnTransit

TRANSACTION_STATE_TOPIC = "__transaction_state"

KEY_VERSION = 0
# Kafka writes v0 until the transaction.version feature (Kafka 4) enables v1; ZooKeeper-era
# readers know only v0, so it is what we write, except for a transaction version 2 client:
# its next producer id and version live only in v1's tagged fields, and a new coordinator
# needs them to complete the transaction. Both are read.
VALUE_VERSION = 0
TV2_VALUE_VERSION = 1
_VALUE_VERSIONS = (0, 1)
_FLEXIBLE_FROM = 1


def partition_for(transactional_id: str, partitions: int) -> int:
    """The state partition of a transactional id: the hash and `abs` of the offsets topic
    (Java's String.hashCode), so an id lands where Kafka puts it."""
    return _hash_partition(transactional_id, partitions)


# fmt: off
_KEY = Struct(
    F("transactional_id", STRING),
)
_VALUE = Struct(
    F("producer_id", INT64),
    F("previous_producer_id", INT64, "1+", default=-1, tag=0),
    F("next_producer_id", INT64, "1+", default=-1, tag=1),
    F("producer_epoch", INT16),
    F("transaction_timeout_ms", INT32),
    F("transaction_status", INT8),
    F("transaction_partitions", Array(Struct(
        F("topic", STRING),
        F("partition_ids", Array(INT32)),
    )), nullable="0+"),
    F("transaction_last_update_timestamp_ms", INT64),
    F("transaction_start_timestamp_ms", INT64),
    F("client_transaction_version", INT16, "1+", default=0, tag=2),
)
# fmt: on


@dataclass(frozen=True)
class TxnRecord:
    """One record of the state topic: the metadata of an id, or None for a tombstone."""

    transactional_id: str
    value: TxnTransit | None


def encode_key(transactional_id: str) -> bytes:
    w = Writer()
    w.int16(KEY_VERSION)
    compile_struct(_KEY, KEY_VERSION, False).encode(w, {"transactional_id": transactional_id})
    return w.getvalue()


def encode_value(transit: TxnTransit, version: int | None = None) -> bytes:
    """`version` None: v1 for a transaction version 2 client's record, else v0."""
    if version is None:
        version = TV2_VALUE_VERSION if transit.client_tv >= 2 else VALUE_VERSION
    if transit.state == TxnState.EMPTY and transit.partitions:
        raise ValueError("an Empty transaction has no partitions")
    if version not in _VALUE_VERSIONS:
        raise ValueError(f"unknown transaction state value version {version}")
    by_topic: dict[str, list[int]] = defaultdict(list)
    for topic, partition in sorted(transit.partitions):
        by_topic[topic].append(partition)
    w = Writer()
    w.int16(version)
    compile_struct(_VALUE, version, version >= _FLEXIBLE_FROM).encode(
        w,
        {
            "producer_id": transit.producer_id,
            # Only a rotated producer id has a previous one worth keeping.
            "previous_producer_id": (
                transit.last_producer_id
                if transit.last_producer_id != transit.producer_id
                else NO_PRODUCER_ID
            ),
            "next_producer_id": transit.next_producer_id,
            "producer_epoch": transit.producer_epoch,
            "transaction_timeout_ms": transit.timeout_ms,
            "transaction_status": int(transit.state),
            # Kafka writes null partitions for Empty, a list (maybe empty) otherwise.
            "transaction_partitions": (
                None
                if transit.state == TxnState.EMPTY
                else [{"topic": t, "partition_ids": ps} for t, ps in by_topic.items()]
            ),
            "transaction_last_update_timestamp_ms": transit.update_ms,
            "transaction_start_timestamp_ms": transit.start_ms,
            "client_transaction_version": transit.client_tv,
        },
    )
    return w.getvalue()


def decode_key(data: bytes) -> str:
    """The transactional id of a state record's key; DecodeError for anything else."""
    r = Reader(data)
    version = r.int16()
    if version != KEY_VERSION:
        raise DecodeError(f"unknown transaction state key version {version}")
    return compile_struct(_KEY, version, False).decode(r)["transactional_id"]


def decode_value(data: bytes) -> TxnTransit:
    r = Reader(data)
    version = r.int16()
    if version not in _VALUE_VERSIONS:
        raise DecodeError(f"unknown transaction state value version {version}")
    v = compile_struct(_VALUE, version, version >= _FLEXIBLE_FROM).decode(r)
    try:
        state = TxnState(v["transaction_status"])
    except ValueError:
        raise DecodeError(f"unknown transaction status {v['transaction_status']}") from None
    partitions: frozenset[tuple[str, int]] = frozenset()
    if state != TxnState.EMPTY and v["transaction_partitions"]:
        partitions = frozenset(
            (p["topic"], pid) for p in v["transaction_partitions"] for pid in p["partition_ids"]
        )
    previous = v["previous_producer_id"]
    return TxnTransit(
        producer_id=v["producer_id"],
        last_producer_id=previous if previous != NO_PRODUCER_ID else v["producer_id"],
        producer_epoch=v["producer_epoch"],
        # Not in the record: as in Kafka, a loaded id has no last epoch.
        last_producer_epoch=NO_PRODUCER_EPOCH,
        timeout_ms=v["transaction_timeout_ms"],
        state=state,
        partitions=partitions,
        start_ms=v["transaction_start_timestamp_ms"],
        update_ms=v["transaction_last_update_timestamp_ms"],
        next_producer_id=v["next_producer_id"],
        client_tv=v["client_transaction_version"],
    )


def encode_record(record: TxnRecord, version: int | None = None) -> tuple[bytes, bytes | None]:
    """(key, value) bytes; a tombstone's value is None."""
    value = None if record.value is None else encode_value(record.value, version)
    return encode_key(record.transactional_id), value


def decode_record(key: bytes, value: bytes | None) -> TxnRecord:
    return TxnRecord(decode_key(key), None if value is None else decode_value(value))


def tombstone(transactional_id: str) -> TxnRecord:
    """The record that removes an expired transactional id (compaction drops it later)."""
    return TxnRecord(transactional_id, None)
