"""The fixed 61-byte header of a record batch (magic 2), parsed without touching the records.

The broker stores batches byte-for-byte as produced, so most of its work is reading
and rewriting this header: baseOffset and partitionLeaderEpoch sit outside the CRC,
which lets the broker assign offsets without recomputing it.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

import crc32c

# Byte offsets inside a batch (see docs/contracts/log.md, "Record batches").
BASE_OFFSET_POS = 0
LENGTH_POS = 8
LEADER_EPOCH_POS = 12
MAGIC_POS = 16
CRC_POS = 17
ATTRIBUTES_POS = 21
HEADER_SIZE = 61
# baseOffset + batchLength: the bytes not counted by batchLength.
LOG_OVERHEAD = 12
# The smallest value batchLength can hold for a v2 batch (header minus LOG_OVERHEAD).
MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD

CODEC_MASK = 0x07
CODEC_NONE, CODEC_GZIP, CODEC_SNAPPY, CODEC_LZ4, CODEC_ZSTD = 0, 1, 2, 3, 4
TIMESTAMP_TYPE_LOG_APPEND = 0x08
TRANSACTIONAL = 0x10
CONTROL = 0x20
DELETE_HORIZON = 0x40

NO_PRODUCER_ID = -1
NO_SEQUENCE = -1

_HEADER = struct.Struct(">qiibIhiqqqhii")
_OFFSET_AND_LENGTH = struct.Struct(">qi")
_INT64 = struct.Struct(">q")
_INT32 = struct.Struct(">i")
_UINT32 = struct.Struct(">I")


class BatchHeader(NamedTuple):
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size(self) -> int:
        """Bytes the whole batch occupies, header included."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def codec(self) -> int:
        return self.attributes & CODEC_MASK

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL)

    @property
    def last_sequence(self) -> int:
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset_delta) & 0x7FFFFFFF


def read_offset_and_length(buf, pos: int = 0) -> tuple[int, int]:
    """baseOffset and batchLength: enough to walk a log without parsing whole headers."""
    return _OFFSET_AND_LENGTH.unpack_from(buf, pos)


def parse_header(buf, pos: int = 0) -> BatchHeader:
    """Parse the header at buf[pos:]; the caller guarantees HEADER_SIZE bytes are there.

    Magic is not checked here: a magic 0/1 message set has a different layout, so
    callers must check `magic == 2` before trusting the other fields.
    """
    return BatchHeader._make(_HEADER.unpack_from(buf, pos))


def crc_is_valid(buf, pos: int, header: BatchHeader) -> bool:
    """CRC-32C over attributes..end of the batch, as the v2 format defines it."""
    end = pos + header.size
    if end > len(buf):
        return False
    return crc32c.crc32c(memoryview(buf)[pos + ATTRIBUTES_POS : end]) == header.crc


def set_base_offset(buf: bytearray, pos: int, base_offset: int) -> None:
    _INT64.pack_into(buf, pos + BASE_OFFSET_POS, base_offset)


def set_leader_epoch(buf: bytearray, pos: int, epoch: int) -> None:
    _INT32.pack_into(buf, pos + LEADER_EPOCH_POS, epoch)


def write_header(buf: bytearray, pos: int, header: BatchHeader) -> None:
    """Pack all 61 header bytes at buf[pos:], the crc field as given in `header`."""
    _HEADER.pack_into(buf, pos, *header)


def compute_crc(buf, pos: int, size: int) -> int:
    """The CRC-32C a batch of `size` bytes at buf[pos:] should carry."""
    return crc32c.crc32c(memoryview(buf)[pos + ATTRIBUTES_POS : pos + size])


def set_crc(buf: bytearray, pos: int, crc: int) -> None:
    _UINT32.pack_into(buf, pos + CRC_POS, crc)
