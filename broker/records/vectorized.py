"""Reading many independent byte records at once with Arrow compute kernels.

Kafka records and Avro values share an encoding style: zigzag varints, length-prefixed
byte strings, fields one after the other with no per-field offsets. A single record must
be read field after field, but the records of a buffer are independent: field k of every
record can be read together once field k-1 of every record has been read. ``Rows`` keeps
one read position per record (an Arrow int32 array into one shared byte buffer) and reads
a field for all records with a handful of kernels: varints by gathering byte k of every
record (one more round only while some record's varint goes on), byte strings by one
binary ``take`` over interleaved offsets into the buffer (one memcpy per value, see
``Rows.slices``). Python runs per field, C++ per record.

Users: the record batch parser (broker/records/columnar.py: offsets, timestamps, keys and
values of fetched batches) and the columnar Avro decoder (ingest/decoders/columnar.py).
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

VARINT_MAX = 10  # bytes of the longest 64-bit varint
_U64 = pa.uint64()
_ONE = pa.scalar(1, _U64)
_INT32_ONE = pa.scalar(1, pa.int32())


class Rows:
    """The rows being read: a read position and an end per row (int32), over one
    buffer, and a bad mask.

    A position may run past its row's end on corrupt data (a varint read too far,
    a fixed value cut short); that is caught once, when the row's final position
    is compared with its end, instead of after every field. Each reader bounds how
    far it can run (the Avro decoder's ``Node.overrun``), and the buffer has that much
    padding after the last row, so every read stays inside it. Lengths of strings and
    bytes are clamped to the room left, so they never add to the overrun.
    """

    __slots__ = ("data", "pos", "end", "bad")

    def __init__(self, data: pa.Array, pos: pa.Array, end: pa.Array, bad: pa.Array) -> None:
        self.data = data
        self.pos = pos
        self.end = end
        self.bad = bad

    @classmethod
    def over(cls, data: pa.Array, starts: pa.Array, ends: pa.Array) -> Rows:
        """Rows ``data[starts[i]:ends[i]]``, none bad yet."""
        count = len(starts)
        return cls(data, starts.cast(pa.int32()), ends.cast(pa.int32()), falses(count))

    def __len__(self) -> int:
        return len(self.pos)

    def subset(self, mask: pa.Array) -> Rows:
        return Rows(self.data, self.pos.filter(mask), self.end.filter(mask), self.bad.filter(mask))

    def merge(self, mask: pa.Array, sub: Rows) -> None:
        self.pos = pc.replace_with_mask(self.pos, mask, sub.pos)
        self.bad = pc.replace_with_mask(self.bad, mask, sub.bad)

    def mark(self, mask: pa.Array) -> None:
        self.bad = pc.or_(self.bad, mask)

    def finish(self) -> pa.Array:
        """The bad mask once every field is read: a row must end exactly at its end."""
        self.mark(pc.not_equal(self.pos, self.end))
        return self.bad

    def room(self) -> pa.Array:
        return pc.subtract(self.end, self.pos)

    def advance(self, count: pa.Array | pa.Scalar | int) -> None:
        if isinstance(count, int):  # a bare int would widen the positions to int64
            count = pa.scalar(count, pa.int32())
        self.pos = pc.add(self.pos, count)

    def byte(self, k: int) -> pa.Array:
        return self.data.take(self.pos if k == 0 else pc.add(self.pos, k))

    def varint(self) -> pa.Array:
        """Raw (zigzag) varints as uint64, advancing past them."""
        first = self.byte(0)
        value = pc.bit_wise_and(first, 0x7F).cast(_U64)
        more = pc.greater_equal(first, 0x80)
        length: pa.Array | pa.Scalar = _INT32_ONE
        k = 1
        while k < VARINT_MAX and pc.any(more).as_py():
            b = self.byte(k)
            part = pc.multiply(pc.bit_wise_and(b, 0x7F).cast(_U64), pa.scalar(1 << (7 * k), _U64))
            value = pc.if_else(more, pc.bit_wise_or(value, part), value)
            length = pc.add(length, more.cast(pa.int32()))
            more = pc.and_(more, pc.greater_equal(b, 0x80))
            k += 1
        if k == VARINT_MAX and pc.any(more).as_py():
            self.mark(more)  # more than 10 bytes: not a varint
        self.advance(length)
        return value

    def long(self) -> pa.Array:
        """Zigzag varints as int64."""
        raw = self.varint()
        half = pc.shift_right(raw, _ONE)
        sign = pc.subtract(pa.scalar(0, _U64), pc.bit_wise_and(raw, _ONE))
        return pc.bit_wise_xor(half, sign).cast(pa.int64(), safe=False)

    def slices(self, sizes: pa.Array) -> pa.Array:
        """The bytes [pos, pos + size) of every row as a binary array, and advance.

        Sizes must already fit their rows (the callers clamp them). Rows lie in
        the buffer in order, so the offsets ``pos0, pos0+size0, pos1, pos1+size1,
        ...`` never decrease: read over the buffer they make a binary array whose
        even values are the slices wanted and whose odd values are the bytes
        between them. Taking the even values copies each slice with one memcpy,
        instead of gathering byte by byte."""
        count = len(sizes)
        ends = pc.add(self.pos, sizes)
        if count == 0:
            self.pos = ends
            return pa.array([], pa.binary())
        interleave, evens = interleaving(count)
        offsets = pa.concat_arrays([self.pos, ends]).take(interleave)
        spans = pa.Array.from_buffers(
            pa.binary(), 2 * count - 1, [None, offsets.buffers()[1], self.data.buffers()[1]]
        )
        self.pos = ends
        return spans.take(evens)

    def lengths(self) -> pa.Array:
        """A bytes/string length prefix (int32), clamped to the room left in the
        row (0 when it has run past its end); bad rows marked."""
        size = self.long()
        room = pc.max_element_wise(self.room(), 0)
        self.mark(pc.or_(pc.less(size, 0), pc.greater(size, room)))
        return pc.min_element_wise(pc.max_element_wise(size, 0), room).cast(pa.int32())

    def nullable_slices(self) -> pa.Array:
        """Kafka's nullable bytes: a length prefix, -1 for null, then the bytes; as a
        binary array (clamped and marked like ``lengths``)."""
        size = self.long()
        null = pc.equal(size, -1)
        room = pc.max_element_wise(self.room(), 0)
        self.mark(pc.or_(pc.less(size, -1), pc.greater(size, room)))
        sizes = pc.min_element_wise(pc.max_element_wise(size, 0), room).cast(pa.int32())
        values = self.slices(sizes)
        if not pc.any(null).as_py():
            return values
        valid = pc.invert(null)  # a fresh array: its bitmap starts at bit 0
        return pa.Array.from_buffers(
            pa.binary(), len(values), [valid.buffers()[1], *values.buffers()[1:]]
        )


_ARANGE: list[pa.Array] = [pa.array([], pa.int32())]
_INTERLEAVINGS: dict[int, tuple[pa.Array, pa.Array]] = {}


def interleaving(count: int) -> tuple[pa.Array, pa.Array]:
    """Indices that interleave two arrays of ``count`` (0, count, 1, count+1, ...)
    and the even indices 0, 2, ... 2*count-2; cached, chunks repeat their sizes."""
    found = _INTERLEAVINGS.get(count)
    if found is None:
        steps = arange(2 * count)
        halves = pc.shift_right(steps, 1)
        odd = pc.bit_wise_and(steps, 1)
        found = (pc.add(halves, pc.multiply(odd, count)), pc.multiply(arange(count), 2))
        if len(_INTERLEAVINGS) > 16:
            _INTERLEAVINGS.clear()
        _INTERLEAVINGS[count] = found
    return found


def arange(count: int) -> pa.Array:
    """0, 1, ..., count-1 as int32 (a slice of a cached array grown by doubling)."""
    if len(_ARANGE[0]) < count:
        size = max(count, 2 * len(_ARANGE[0]), 1 << 16)
        ones = pa.nulls(size, pa.int32()).fill_null(1)
        _ARANGE[0] = pc.subtract(pc.cumulative_sum(ones), _INT32_ONE)
    return _ARANGE[0].slice(0, count)


def packed(values: pa.Array, pad: int) -> tuple[pa.Array, pa.Array, pa.Array]:
    """The values of a binary array as one byte buffer with ``pad`` spare bytes after
    the last: (uint8 data, int64 start of each value, int64 end of each value). A null
    value is an empty one (start == end). One copy of the value bytes."""
    count = len(values)
    if values.type != pa.binary():
        values = values.cast(pa.binary())
    offsets = pa.Array.from_buffers(
        pa.int32(), count + 1, [None, values.buffers()[1]], offset=values.offset
    )
    first = offsets[0].as_py()
    size = offsets[count].as_py() - first
    raw = values.buffers()[2]
    body = pa.Array.from_buffers(
        pa.uint8(), size, [None, raw if raw is not None else pa.py_buffer(b"")], offset=first
    )
    data = pa.concat_arrays([body, pa.nulls(pad, pa.uint8()).fill_null(0)])
    starts = pc.subtract(offsets.slice(0, count).cast(pa.int64()), first)
    ends = pc.subtract(offsets.slice(1, count).cast(pa.int64()), first)
    if values.null_count:
        ends = pc.if_else(values.is_valid(), ends, starts)
    return data, starts, ends


def falses(count: int) -> pa.Array:
    return pa.nulls(count, pa.bool_()).fill_null(False)


def values_of(binary: pa.Array) -> pa.Buffer:
    """The value bytes of a freshly built binary array (offsets start at 0)."""
    data = binary.buffers()[2]
    return pa.py_buffer(b"") if data is None else data


def constant(value: Any, typ: pa.DataType, count: int) -> pa.Array:
    one = pa.array([value], typ)
    return one.take(pa.nulls(count, pa.int32()).fill_null(0))


_U64_SIGN = pa.scalar(63, _U64)


def zigzag_varints(values: pa.Array) -> pa.Array:
    """Zigzag varints of integers (no nulls), one binary value per integer: the
    writing counterpart of ``Rows.long``. Byte k of every value is computed for all
    values at once; the bytes are laid out value after value by one ``take``."""
    count = len(values)
    raw = values.cast(pa.int64()).cast(_U64, safe=False)  # two's complement bits
    negative = pc.shift_right(raw, _U64_SIGN)
    u = pc.bit_wise_xor(pc.shift_left(raw, _ONE), pc.subtract(pa.scalar(0, _U64), negative))
    sizes = pa.nulls(count, pa.int32()).fill_null(1)
    width = 1
    for k in range(1, VARINT_MAX):
        longer = pc.greater_equal(u, pa.scalar(1 << (7 * k), _U64))
        if not pc.any(longer).as_py():
            break
        sizes = pc.add(sizes, longer.cast(pa.int32()))
        width = k + 1
    columns = []
    for k in range(width):
        part = pc.bit_wise_and(pc.shift_right(u, pa.scalar(7 * k, _U64)), pa.scalar(0x7F, _U64))
        more = pc.greater(sizes, k + 1).cast(_U64)
        columns.append(pc.bit_wise_or(part, pc.multiply(more, pa.scalar(0x80, _U64))))
    # Value after value: byte k of value i sits at k * count + i of the columns joined.
    index = arange(count * width)
    row = pc.divide(index, pa.scalar(width, pa.int32()))
    k = pc.subtract(index, pc.multiply(row, pa.scalar(width, pa.int32())))
    keep = pc.less(k, sizes.take(row))
    source = pc.add(pc.multiply(k, pa.scalar(count, pa.int32())), row).filter(keep)
    data = pa.concat_arrays(columns).cast(pa.uint8()).take(source)
    offsets = pa.concat_arrays([pa.array([0], pa.int32()), pc.cumulative_sum(sizes)])
    return pa.Array.from_buffers(
        pa.binary(), count, [None, offsets.buffers()[1], data.buffers()[1]]
    )
