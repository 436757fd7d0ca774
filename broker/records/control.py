"""Control records: the COMMIT and ABORT markers that end a transaction in a partition.

A marker is the only record of a control batch (attribute bit 5) written by the
partition's leader for WriteTxnMarkers, never by clients. Layouts are Kafka's
(`ControlRecordType`, `EndTransactionMarker`): the key is int16 version 0 and int16 type
(0 ABORT, 1 COMMIT); the value is int16 version 0 and the transaction coordinator's
epoch, int32. Readers skip control batches; read_committed readers and the group
coordinator's load also use them to end a producer's transaction
(docs/contracts/transactions.md).
"""

from __future__ import annotations

import enum
import struct

_KEY = struct.Struct(">hh")
_VALUE = struct.Struct(">hi")


class ControlType(enum.IntEnum):
    ABORT = 0
    COMMIT = 1


def marker_record(commit: bool, coordinator_epoch: int) -> tuple[bytes, bytes]:
    """(key, value) of a COMMIT or ABORT marker."""
    kind = ControlType.COMMIT if commit else ControlType.ABORT
    return _KEY.pack(0, kind), _VALUE.pack(0, coordinator_epoch)


def control_type(key) -> ControlType | None:
    """The type of a control record by its key; None for a key that is not one we know
    (Kafka skips unknown control types too)."""
    if key is None or len(key) < _KEY.size:
        return None
    _, kind = _KEY.unpack_from(key)
    return ControlType(kind) if kind in ControlType._value2member_map_ else None
