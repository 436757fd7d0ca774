"""Key partitioning exactly as the Java client does it, so keyed records from our
producer land on the same partitions as those from Java, kafka-python and
librdkafka's murmur2 partitioner.

Records without a key are placed by the producer (sticky partitioning), not here.
"""

from __future__ import annotations

import struct

_SEED = 0x9747B28C
_M = 0x5BD1E995
_MASK = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Kafka's Utils.murmur2: MurmurHash2, 32-bit, seed 0x9747b28c, as a signed int32."""
    length = len(data)
    h = (_SEED ^ length) & _MASK
    tail = length & ~3
    # Whole little-endian 32-bit words first.
    words = struct.unpack_from(f"<{tail >> 2}I", data) if tail else ()
    for k in words:
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = ((h * _M) & _MASK) ^ k
    rest = length & 3
    if rest == 3:
        h ^= data[tail + 2] << 16
    if rest >= 2:
        h ^= data[tail + 1] << 8
    if rest >= 1:
        h ^= data[tail]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def to_positive(number: int) -> int:
    """Kafka's Utils.toPositive: clears the sign bit (not abs(), which differs on MIN_VALUE)."""
    return number & 0x7FFFFFFF


def partition_for_key(key: bytes, num_partitions: int) -> int:
    """The partition the Java client's default partitioner picks for a non-null key."""
    if num_partitions <= 0:
        raise ValueError(f"num_partitions must be positive, got {num_partitions}")
    return to_positive(murmur2(key)) % num_partitions
