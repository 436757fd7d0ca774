"""Primitive wire types, the declaration vocabulary, and the bounded Reader/Writer.

Everything here is sans-I/O: a `Reader` walks a bytes-like object and raises
`DecodeError` (and nothing else) the moment the input cannot be what it claims to
be; a `Writer` collects output as a list of parts so large payloads (record
batches, file regions) are passed along by reference instead of being copied.

The declaration vocabulary (`Field`, `Struct`, `Array` and the primitive type
constants) mirrors apache/kafka's message JSON: a field has a version range, may
be nullable in some versions, may be a tagged field in flexible versions.
`broker.protocol.codec` compiles declarations into per-version functions.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable
from typing import Any


class DecodeError(Exception):
    """Input bytes that are not a valid encoding. The only exception decoding raises."""


class EncodeError(ValueError):
    """A value that cannot be encoded as declared (wrong type, null where not allowed...)."""


_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_U16 = struct.Struct(">H")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_I64 = struct.Struct(">q")
_F64 = struct.Struct(">d")

# Bytes objects at least this long are kept as their own part by the Writer rather
# than copied into its buffer: the final join then copies them exactly once.
_BY_REFERENCE = 1024


class Reader:
    """A cursor over `data[offset:end]` that never reads past `end`."""

    __slots__ = ("buf", "pos", "end")

    def __init__(
        self, data: bytes | bytearray | memoryview, offset: int = 0, end: int | None = None
    ):
        buf = data if isinstance(data, memoryview) else memoryview(data)
        if buf.format != "B" or buf.ndim != 1:
            buf = buf.cast("B")
        size = len(buf)
        if end is None:
            end = size
        if not 0 <= offset <= end <= size:
            raise DecodeError(f"offset {offset} / end {end} outside a buffer of {size} bytes")
        self.buf = buf
        self.pos = offset
        self.end = end

    def remaining(self) -> int:
        return self.end - self.pos

    def _take(self, n: int) -> int:
        """Advance by n bytes and return where they start, or fail if they are not there."""
        p = self.pos
        q = p + n
        if n < 0 or q > self.end:
            raise DecodeError(f"need {n} bytes at offset {p}, only {self.end - p} left")
        self.pos = q
        return p

    def skip(self, n: int) -> None:
        self._take(n)

    def int8(self) -> int:
        return _I8.unpack_from(self.buf, self._take(1))[0]

    def int16(self) -> int:
        return _I16.unpack_from(self.buf, self._take(2))[0]

    def uint16(self) -> int:
        return _U16.unpack_from(self.buf, self._take(2))[0]

    def int32(self) -> int:
        return _I32.unpack_from(self.buf, self._take(4))[0]

    def uint32(self) -> int:
        return _U32.unpack_from(self.buf, self._take(4))[0]

    def int64(self) -> int:
        return _I64.unpack_from(self.buf, self._take(8))[0]

    def float64(self) -> float:
        return _F64.unpack_from(self.buf, self._take(8))[0]

    def bool(self) -> bool:
        return self.buf[self._take(1)] != 0

    def uuid(self) -> uuid.UUID:
        p = self._take(16)
        return uuid.UUID(bytes=bytes(self.buf[p : p + 16]))

    def uvarint(self, max_bytes: int = 5) -> int:
        """Unsigned LEB128 as Kafka writes it; 5 bytes for 32-bit values, 10 for 64-bit."""
        buf, pos, end = self.buf, self.pos, self.end
        value = 0
        shift = 0
        for _ in range(max_bytes):
            if pos >= end:
                raise DecodeError(f"truncated varint at offset {self.pos}")
            b = buf[pos]
            pos += 1
            value |= (b & 0x7F) << shift
            if b < 0x80:
                self.pos = pos
                return value
            shift += 7
        raise DecodeError(f"varint longer than {max_bytes} bytes at offset {self.pos}")

    def uvarlong(self) -> int:
        return self.uvarint(10)

    def varint(self) -> int:
        """Zigzag-encoded signed 32-bit varint (record fields)."""
        v = self.uvarint(5)
        return (v >> 1) ^ -(v & 1)

    def varlong(self) -> int:
        """Zigzag-encoded signed 64-bit varint (record fields)."""
        v = self.uvarint(10)
        return (v >> 1) ^ -(v & 1)

    def raw(self, n: int) -> memoryview:
        """The next n bytes as a view (no copy)."""
        p = self._take(n)
        return self.buf[p : p + n]

    def bytes(self, n: int) -> bytes:
        p = self._take(n)
        return bytes(self.buf[p : p + n])

    def text(self, n: int) -> str:
        p = self._take(n)
        try:
            return str(self.buf[p : p + n], "utf-8")
        except UnicodeDecodeError as e:
            raise DecodeError(f"invalid UTF-8 in string at offset {p}") from e

    def sub(self, n: int) -> Reader:
        """A Reader over the next n bytes, which this reader skips."""
        p = self._take(n)
        return Reader(self.buf, p, p + n)

    # Length-prefixed values. Non-flexible versions use int16 (strings) or int32
    # (bytes, arrays) lengths with -1 for null; flexible versions use an unsigned
    # varint N+1 with 0 for null (KIP-482).

    def length(self, compact: bool, wide: bool) -> int:
        """A length prefix; -1 means null."""
        if compact:
            return self.uvarint() - 1
        return self.int32() if wide else self.int16()

    def skip_tagged_fields(self) -> None:
        for _ in range(self.tag_count()):
            self.uvarint()
            self.skip(self.uvarint())

    def tag_count(self) -> int:
        n = self.uvarint()
        if n * 2 > self.remaining():  # every tagged field needs at least a tag and a size byte
            raise DecodeError(f"{n} tagged fields cannot fit in {self.remaining()} bytes")
        return n


def is_bytes_like(obj: object) -> bool:
    return isinstance(obj, bytes | bytearray | memoryview)


class Writer:
    """Builds an encoding as a list of parts.

    Small values are appended to an internal bytearray; large bytes values and
    non-bytes objects (file regions) become parts of their own, untouched.
    With `size_prefix=True` the output starts with the int32 size of the rest.
    """

    __slots__ = ("buf", "_parts", "_size_prefix")

    def __init__(self, size_prefix: bool = False):
        self.buf = bytearray(b"\0\0\0\0" if size_prefix else b"")
        self._parts: list[Any] = []
        self._size_prefix = size_prefix

    def int8(self, v: int) -> None:
        self.buf += _I8.pack(v)

    def int16(self, v: int) -> None:
        self.buf += _I16.pack(v)

    def uint16(self, v: int) -> None:
        self.buf += _U16.pack(v)

    def int32(self, v: int) -> None:
        self.buf += _I32.pack(v)

    def uint32(self, v: int) -> None:
        self.buf += _U32.pack(v)

    def int64(self, v: int) -> None:
        self.buf += _I64.pack(v)

    def float64(self, v: float) -> None:
        self.buf += _F64.pack(v)

    def bool(self, v: bool) -> None:
        self.buf.append(1 if v else 0)

    def uuid(self, v: uuid.UUID) -> None:
        self.buf += v.bytes

    def uvarint(self, v: int) -> None:
        if v < 0:
            raise EncodeError(f"unsigned varint cannot hold {v}")
        buf = self.buf
        while v >= 0x80:
            buf.append((v & 0x7F) | 0x80)
            v >>= 7
        buf.append(v)

    def varint(self, v: int) -> None:
        self.uvarint(((v << 1) ^ (v >> 31)) & 0xFFFFFFFF)

    def varlong(self, v: int) -> None:
        self.uvarint(((v << 1) ^ (v >> 63)) & 0xFFFFFFFFFFFFFFFF)

    def raw(self, data: bytes | bytearray | memoryview) -> None:
        if len(data) >= _BY_REFERENCE and isinstance(data, bytes):
            self.part(data)
        else:
            self.buf += data

    def part(self, obj: Any) -> None:
        """Emit obj as a part of its own (bytes by reference, or e.g. a FileRegion)."""
        if self.buf:
            self._parts.append(self.buf)
            self.buf = bytearray()
        self._parts.append(obj)

    def length(self, n: int, compact: bool, wide: bool) -> None:
        """A length prefix (n = -1 for null)."""
        if compact:
            self.uvarint(n + 1)
        elif wide:
            self.int32(n)
        else:
            self.int16(n)

    def _chunks(self) -> list[Any]:
        chunks = self._parts + [self.buf] if self.buf else list(self._parts)
        if self._size_prefix:
            # The reserved 4 bytes are at the start of the first chunk, which is
            # always one of our own bytearrays, so it can be patched in place.
            total = sum(len(c) for c in chunks) - 4
            chunks[0][0:4] = _I32.pack(total)
        return chunks

    def getparts(self) -> list[Any]:
        """The output: runs of bytes joined into one bytes object each, other objects as is."""
        out: list[Any] = []
        run: list[Any] = []
        for c in self._chunks():
            if is_bytes_like(c):
                run.append(c)
                continue
            if run:
                out.append(_join(run))
                run = []
            out.append(c)
        if run:
            out.append(_join(run))
        return out

    def getvalue(self) -> bytes:
        """The output as one bytes object; every part must be bytes-like."""
        chunks = self._chunks()
        for c in chunks:
            if not is_bytes_like(c):
                raise EncodeError(f"{type(c).__name__} part cannot be flattened to bytes")
        return _join(chunks)


def _join(run: list[Any]) -> bytes:
    if len(run) == 1 and isinstance(run[0], bytes):
        return run[0]
    return b"".join(run)


# --- Declarations ---------------------------------------------------------

_MISSING: Any = object()


def parse_versions(spec: str | None) -> tuple[int, int] | None:
    """Kafka's version-range notation: "3+", "0-7", "5" or "none" -> (low, high)."""
    if spec is None or spec == "none":
        return None
    if spec.endswith("+"):
        return int(spec[:-1]), 0x7FFF
    if "-" in spec:
        lo, hi = spec.split("-")
        return int(lo), int(hi)
    return int(spec), int(spec)


def in_range(version: int, rng: tuple[int, int] | None) -> bool:
    return rng is not None and rng[0] <= version <= rng[1]


def on_the_wire(f: Field, version: int, flexible: bool) -> bool:
    """Whether `f` is encoded at `version` (a tagged field only in flexible versions);
    one that is not decodes to its default."""
    return in_range(version, f.versions) and (f.tag is None or flexible)


class Type:
    """A wire type. Primitive types produce their own read/write functions; Array and
    Struct are compiled by the codec because they depend on the version."""

    name = "?"

    def decoder(self, flexible: bool, nullable: bool) -> Callable[[Reader], Any]:
        raise NotImplementedError

    def encoder(self, flexible: bool, nullable: bool) -> Callable[[Writer, Any], None]:
        raise NotImplementedError

    def min_size(self, flexible: bool) -> int:
        """Fewest bytes any value takes; bounds array counts before allocating."""
        raise NotImplementedError

    def zero(self) -> Any:
        """The default value when a declaration gives none."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return self.name


class Fixed(Type):
    """A fixed-width primitive: the Reader/Writer method of the same name does the work."""

    def __init__(self, name: str, size: int, zero: Any, fmt: str | None = None):
        self.name = name
        self.size = size
        self._zero = zero
        self.fmt = fmt  # struct code for packing arrays of this type in one call

    def decoder(self, flexible: bool, nullable: bool) -> Callable[[Reader], Any]:
        return getattr(Reader, self.name)

    def encoder(self, flexible: bool, nullable: bool) -> Callable[[Writer, Any], None]:
        return getattr(Writer, self.name)

    def min_size(self, flexible: bool) -> int:
        return self.size

    def zero(self) -> Any:
        return self._zero


def _check_null(nullable: bool, what: str) -> None:
    if not nullable:
        raise DecodeError(f"null {what} where the version does not allow null")


class _String(Type):
    name = "string"

    def decoder(self, flexible: bool, nullable: bool) -> Callable[[Reader], Any]:
        def read(r: Reader) -> str | None:
            n = r.uvarint() - 1 if flexible else r.int16()
            if n < 0:
                _check_null(nullable and n == -1, "string")
                return None
            return r.text(n)

        return read

    def encoder(self, flexible: bool, nullable: bool) -> Callable[[Writer, Any], None]:
        def write(w: Writer, v: str | None) -> None:
            if v is None:
                if not nullable:
                    raise EncodeError("null string where the version does not allow null")
                w.length(-1, flexible, False)
                return
            data = v.encode("utf-8")
            if not flexible and len(data) > 0x7FFF:
                raise EncodeError(f"string of {len(data)} bytes exceeds the int16 length")
            w.length(len(data), flexible, False)
            w.buf += data

        return write

    def min_size(self, flexible: bool) -> int:
        return 1 if flexible else 2

    def zero(self) -> Any:
        return ""


class _Bytes(Type):
    name = "bytes"

    def decoder(self, flexible: bool, nullable: bool) -> Callable[[Reader], Any]:
        def read(r: Reader) -> bytes | None:
            n = r.uvarint() - 1 if flexible else r.int32()
            if n < 0:
                _check_null(nullable and n == -1, self.name)
                return None
            return r.bytes(n)

        return read

    def encoder(self, flexible: bool, nullable: bool) -> Callable[[Writer, Any], None]:
        def write(w: Writer, v: Any) -> None:
            if v is None:
                if not nullable:
                    raise EncodeError(f"null {self.name} where the version does not allow null")
                w.length(-1, flexible, True)
                return
            w.length(len(v), flexible, True)
            w.raw(v)

        return write

    def min_size(self, flexible: bool) -> int:
        return 1 if flexible else 4

    def zero(self) -> Any:
        return b""


class _Records(_Bytes):
    """Record batches: on decode a memoryview into the frame (no copy: a fetch response
    is mostly records, and copying them halved the client's fetch throughput), so the
    frame must outlive the view; on encode bytes, None, or a list of parts (bytes or
    objects with __len__ such as FileRegion) emitted untouched."""

    name = "records"

    def decoder(self, flexible: bool, nullable: bool) -> Callable[[Reader], Any]:
        def read(r: Reader) -> memoryview | None:
            n = r.uvarint() - 1 if flexible else r.int32()
            if n < 0:
                _check_null(nullable and n == -1, self.name)
                return None
            return r.raw(n)

        return read

    def encoder(self, flexible: bool, nullable: bool) -> Callable[[Writer, Any], None]:
        write_bytes = super().encoder(flexible, True)

        def write(w: Writer, v: Any) -> None:
            if v is None or is_bytes_like(v):
                write_bytes(w, v)
                return
            if not isinstance(v, list):
                v = [v]  # a single region (FileRegion is a tuple, so test for list)
            w.length(sum(len(p) for p in v), flexible, True)
            for p in v:
                if is_bytes_like(p):
                    w.raw(p)
                else:
                    w.part(p)

        return write

    def zero(self) -> Any:
        return None


class _Uuid(Fixed):
    def __init__(self) -> None:
        super().__init__("uuid", 16, uuid.UUID(int=0))


INT8 = Fixed("int8", 1, 0, "b")
INT16 = Fixed("int16", 2, 0, "h")
UINT16 = Fixed("uint16", 2, 0, "H")
INT32 = Fixed("int32", 4, 0, "i")
UINT32 = Fixed("uint32", 4, 0, "I")
INT64 = Fixed("int64", 8, 0, "q")
FLOAT64 = Fixed("float64", 8, 0.0, "d")
BOOL = Fixed("bool", 1, False)
UUID = _Uuid()
STRING = _String()
BYTES = _Bytes()
RECORDS = _Records()


class Array(Type):
    """`[]T` in Kafka's JSON: T is a primitive type or a Struct."""

    name = "array"

    def __init__(self, element: Type):
        self.element = element

    def zero(self) -> Any:
        return []

    def __repr__(self) -> str:
        return f"[]{self.element!r}"


class Field:
    """One field of a struct, as in Kafka's message JSON.

    versions / nullable use Kafka's notation ("0+", "3-5", "7"). `tag` makes the
    field a tagged field in the flexible versions it exists in. `default` is the
    value used when a version lacks the field or an encoder is not given it;
    without one it is None for a version where the field is nullable, else the
    type's zero (0, "", b"", [], False, a struct of defaults).
    """

    __slots__ = ("name", "type", "versions", "nullable", "default", "tag")

    def __init__(
        self,
        name: str,
        type: Type,
        versions: str = "0+",
        *,
        nullable: str | None = None,
        default: Any = _MISSING,
        tag: int | None = None,
    ):
        self.name = name
        self.type = type
        self.versions = parse_versions(versions)
        self.nullable = parse_versions(nullable)
        self.default = default
        self.tag = tag

    def __repr__(self) -> str:
        return f"Field({self.name!r}, {self.type!r})"


class Struct(Type):
    """An ordered list of fields: a message body, an array element or an inline struct."""

    name = "struct"

    def __init__(self, *fields: Field):
        self.fields = fields
        names = [f.name for f in fields]
        if len(set(names)) != len(names):
            raise ValueError(f"duplicate field names in {names}")

    def zero(self) -> Any:
        # Absent inline structs default to a struct of their fields' defaults.
        return {f.name: default_of(f, None) for f in self.fields}


def default_of(field: Field, version: int | None) -> Any:
    """A fresh default value for field (fresh: callers may mutate lists and dicts)."""
    if field.default is not _MISSING:
        d = field.default
        return list(d) if isinstance(d, list) else d
    if version is not None and in_range(version, field.nullable):
        return None
    return field.type.zero()
