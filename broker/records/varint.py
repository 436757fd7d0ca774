"""Zigzag varints, the integer encoding inside v2 records.

Encoding sits on the producer hot path, so the encodings of small non-negative
numbers (offset deltas, lengths, small timestamp deltas) are precomputed once.
"""

from __future__ import annotations

# Non-negative values below this come from SMALL; 16 Ki entries cost about 600 KiB.
SMALL_LIMIT = 1 << 14


def encode_zigzag(value: int) -> bytes:
    """The zigzag varint of a signed 64-bit value."""
    n = ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


SMALL: list[bytes] = [encode_zigzag(i) for i in range(SMALL_LIMIT)]
MINUS_ONE = encode_zigzag(-1)


def zigzag(value: int) -> bytes:
    """encode_zigzag with the table fast path; callers inline `SMALL[v]` when they can."""
    if 0 <= value < SMALL_LIMIT:
        return SMALL[value]
    return encode_zigzag(value)


class VarintError(ValueError):
    """A varint runs past the buffer or past 10 bytes."""


def decode_zigzag(buf, pos: int, end: int) -> tuple[int, int]:
    """Read a zigzag varint (up to 64 bits) from buf[pos:end]; returns (value, new pos)."""
    result = shift = 0
    limit = pos + 10
    if limit > end:
        limit = end
    while pos < limit:
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            if result >> 64:
                break
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
    raise VarintError("truncated or overlong varint")
