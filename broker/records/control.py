"""Transaction markers: the control batches that end a transaction in a partition.

A marker is a batch with the transactional and control attributes, the producer id and
epoch of the transaction it ends, no sequence, and one record: key = version int16 (0)
and type int16 (0 ABORT, 1 COMMIT); value = version int16 (0) and the coordinator epoch
int32 (docs/contracts/log.md, "Record batches", and docs/contracts/transactions.md,
"Markers"). Clients never write one (Produce refuses control batches); partition leaders
append them when the transaction coordinator says (WriteTxnMarkers).
"""

from __future__ import annotations

import struct
from enum import IntEnum
from typing import NamedTuple

from broker.records.batch import CorruptRecordError, build_batch, parse_records
from broker.records.header import HEADER_SIZE, NO_SEQUENCE, BatchHeader

_KEY = struct.Struct(">hh")
_VALUE = struct.Struct(">hi")


class ControlType(IntEnum):
    ABORT = 0
    COMMIT = 1


class Marker(NamedTuple):
    type: ControlType
    coordinator_epoch: int

    @property
    def is_abort(self) -> bool:
        return self.type == ControlType.ABORT


def build_marker(
    producer_id: int,
    producer_epoch: int,
    commit: bool,
    coordinator_epoch: int,
    timestamp_ms: int,
    partition_leader_epoch: int = -1,
) -> bytes:
    """One marker batch at offset 0 (the log assigns the real one)."""
    kind = ControlType.COMMIT if commit else ControlType.ABORT
    return build_batch(
        [(_KEY.pack(0, kind), _VALUE.pack(0, coordinator_epoch), timestamp_ms, ())],
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=NO_SEQUENCE,
        partition_leader_epoch=partition_leader_epoch,
        transactional=True,
        is_control=True,
    )


def parse_marker(buf, pos: int, header: BatchHeader) -> Marker | None:
    """The marker of the control batch at buf[pos:], or None when its key is not a
    transaction marker's (Kafka skips unknown control types too). Markers are never
    compressed, so this reads the record in place."""
    if header.records_count == 0:  # emptied by the log cleaner: it ends nothing any more
        return None
    data = bytes(memoryview(buf)[pos + HEADER_SIZE : pos + header.size])
    if header.codec != 0:
        raise CorruptRecordError(f"control batch at offset {header.base_offset} is compressed")
    records = parse_records(data, header.records_count, header.base_offset)
    if not records or records[0].key is None or len(records[0].key) < _KEY.size:
        raise CorruptRecordError(f"control batch at offset {header.base_offset} has no key")
    _, kind = _KEY.unpack_from(records[0].key)
    if kind not in (ControlType.ABORT, ControlType.COMMIT):
        return None
    value = records[0].value or b""
    coordinator_epoch = _VALUE.unpack_from(value)[1] if len(value) >= _VALUE.size else -1
    return Marker(ControlType(kind), coordinator_epoch)
