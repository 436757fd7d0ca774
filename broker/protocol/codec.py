"""One generic encoder/decoder for every declared API and version.

A declaration (`types.Struct`) is compiled once per (struct, version) into a pair
of functions generated as Python source (codegen.py: straight-line code, fixed-width
runs in one struct call); the closure codec here -- a loop over (name, function)
pairs with the field list resolved up front -- is the reference they fall back to on
any input they do not handle, so every error message comes from one place. Compiled
codecs are cached; Produce and Fetch pay the compilation once per version.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from functools import cache
from typing import Any

from .apis import API_BY_KEY, Api
from .codegen import generate
from .types import (
    _MISSING,
    Array,
    DecodeError,
    EncodeError,
    Field,
    Fixed,
    Reader,
    Struct,
    Type,
    Writer,
    default_of,
    in_range,
    on_the_wire,
)

Decoder = Callable[[Reader], Any]
Encoder = Callable[[Writer, Any], None]


class Encoded(bytes):
    """A struct value already encoded at the version being written: the struct's encoder
    copies it as it is. For parts of an answer that repeat unchanged across requests and
    cost a walk of thousands of dicts each time (Metadata's topic entries, cached per
    topic by broker/server/metadata.py); `encode_struct` makes them."""

    __slots__ = ()


def encode_struct(s: Struct, version: int, flexible: bool, value: dict) -> Encoded:
    """`value` encoded as `s` at `version`, for an `Encoded` part of a later answer."""
    w = Writer()
    compile_struct(s, version, flexible).encode(w, value)
    return Encoded(w.getvalue())


class Compiled:
    """The decoder and encoder of one struct (or any type) at one version; for a
    generated struct also its unchecked functions (`fast_*`: no fallback, for the
    generated code of the structs around it)."""

    __slots__ = ("decode", "encode", "min_size", "fast_decode", "fast_encode")

    def __init__(self, decode: Decoder, encode: Encoder, min_size: int):
        self.decode = decode
        self.encode = encode
        self.min_size = min_size
        self.fast_decode = decode
        self.fast_encode = encode


def compile_type(
    t: Type, version: int, flexible: bool, nullable: bool = False, reference: bool = False
) -> Compiled:
    """`reference`: the closure codec all the way down (what generated code falls back
    to and what the equivalence tests compare with)."""
    if isinstance(t, Struct):
        if nullable:
            raise TypeError("nullable struct fields are not supported")
        return (reference_struct if reference else compile_struct)(t, version, flexible)
    if isinstance(t, Array):
        return _compile_array(t, version, flexible, nullable, reference)
    return Compiled(
        t.decoder(flexible, nullable), t.encoder(flexible, nullable), t.min_size(flexible)
    )


def _compile_array(
    t: Array, version: int, flexible: bool, nullable: bool, reference: bool
) -> Compiled:
    elem = compile_type(t.element, version, flexible, reference=reference)
    elem_min = max(1, elem.min_size)
    read_elem = elem.decode
    write_elem = elem.encode
    # Arrays of fixed-width numbers (replica lists, partition indexes) are packed
    # and unpacked in one struct call instead of one per element.
    fmt = t.element.fmt if isinstance(t.element, Fixed) else None

    def read(r: Reader) -> list | None:
        n = r.uvarint() - 1 if flexible else r.int32()
        if n < 0:
            if n == -1 and nullable:
                return None
            raise DecodeError("null array where the version does not allow null")
        if n * elem_min > r.end - r.pos:
            raise DecodeError(f"array of {n} elements cannot fit in {r.end - r.pos} bytes")
        if fmt is not None:
            p = r._take(n * elem_min)
            return list(struct.unpack_from(f">{n}{fmt}", r.buf, p))
        return [read_elem(r) for _ in range(n)]

    def write(w: Writer, v: list | None) -> None:
        if v is None:
            if not nullable:
                raise EncodeError("null array where the version does not allow null")
            w.length(-1, flexible, True)
            return
        w.length(len(v), flexible, True)
        if fmt is not None:
            w.buf += struct.pack(f">{len(v)}{fmt}", *v)
            return
        for item in v:
            write_elem(w, item)

    return Compiled(read, write, 1 if flexible else 4)


@cache
def compile_struct(s: Struct, version: int, flexible: bool) -> Compiled:
    """The generated codec of `s` at `version`, falling back to the reference one."""
    ref = reference_struct(s, version, flexible)
    fast_decode, fast_encode = generate(
        s,
        version,
        flexible,
        child=lambda t: compile_struct(t, version, flexible),
        element=lambda t, nullable: _pair(compile_type(t, version, flexible, nullable, True)),
        tagged=(_read_tagged, _write_tagged, ref.tag_readers, ref.tag_writers),
        encoded=Encoded,
    )
    slow_decode, slow_encode = ref.decode, ref.encode

    def decode(r: Reader) -> dict:
        start = r.pos
        try:
            return fast_decode(r)
        except Exception:
            r.pos = start
            return slow_decode(r)  # raises the precise DecodeError

    def encode(w: Writer, value: dict) -> None:
        buf, size, parts = w.buf, len(w.buf), len(w._parts)
        try:
            fast_encode(w, value)
        except Exception:
            del w._parts[parts:]  # a part() pushed `buf` there and started a new one
            del buf[size:]
            w.buf = buf
            slow_encode(w, value)  # raises the precise EncodeError

    compiled = Compiled(decode, encode, ref.min_size)
    compiled.fast_decode, compiled.fast_encode = fast_decode, fast_encode
    return compiled


def _pair(c: Compiled) -> tuple[Decoder, Encoder]:
    return c.decode, c.encode


class _Reference(Compiled):
    __slots__ = ("tag_readers", "tag_writers")


@cache
def reference_struct(s: Struct, version: int, flexible: bool) -> _Reference:
    """The closure codec of `s` at `version` (nested structs too)."""
    plain: list[tuple[str, Decoder, Encoder, Callable[[], Any]]] = []
    tagged: dict[int, tuple[str, Decoder, Encoder, Callable[[], Any]]] = {}
    absent: list[Field] = []
    min_size = 1 if flexible else 0  # flexible structs end with a tag count
    for f in s.fields:
        if not on_the_wire(f, version, flexible):
            absent.append(f)
            continue
        c = compile_type(f.type, version, flexible, in_range(version, f.nullable), True)
        entry = (f.name, c.decode, c.encode, _default_factory(f, version))
        if f.tag is not None:
            tagged[f.tag] = entry
        else:
            plain.append(entry)
            min_size += c.min_size

    fill = [(f.name, _default_factory(f, version)) for f in absent]
    fill += [(name, dflt) for name, _, _, dflt in tagged.values()]
    readers = [(name, dec) for name, dec, _, _ in plain]
    writers = [(name, enc, dflt) for name, _, enc, dflt in plain]
    tag_writers = sorted((tag, name, enc, dflt) for tag, (name, _, enc, dflt) in tagged.items())
    tag_readers = {tag: (name, dec) for tag, (name, dec, _, _) in tagged.items()}

    def decode(r: Reader) -> dict:
        out: dict[str, Any] = {}
        name = None
        try:
            for name, dec in readers:
                out[name] = dec(r)
            for name, dflt in fill:
                out[name] = dflt()
            if flexible:
                name = "<tagged fields>"
                _read_tagged(r, out, tag_readers)
        except DecodeError as e:
            e.add_note(f"in field {name!r}")
            raise
        return out

    def encode(w: Writer, value: dict) -> None:
        if value.__class__ is Encoded:
            w.buf += value
            return
        get = value.get
        name = None
        try:
            for name, enc, dflt in writers:
                v = get(name, _MISSING)
                enc(w, dflt() if v is _MISSING else v)
            if flexible:
                name = "<tagged fields>"
                _write_tagged(w, get, tag_writers)
        except (EncodeError, TypeError, AttributeError, struct.error, OverflowError) as e:
            if not isinstance(e, EncodeError):
                e = EncodeError(f"{type(e).__name__}: {e}")
            e.add_note(f"in field {name!r}")
            raise e from None

    compiled = _Reference(decode, encode, min_size)
    compiled.tag_readers, compiled.tag_writers = tag_readers, tag_writers
    return compiled


def _default_factory(f: Field, version: int) -> Callable[[], Any]:
    value = default_of(f, version)
    if isinstance(value, list | dict):
        return lambda: default_of(f, version)
    return lambda: value


def _read_tagged(r: Reader, out: dict, tag_readers: dict[int, tuple[str, Decoder]]) -> None:
    for _ in range(r.tag_count()):
        tag = r.uvarint()
        size = r.uvarint()
        entry = tag_readers.get(tag)
        if entry is None:
            r.skip(size)  # unknown tags are skipped, as KIP-482 requires
        else:
            out[entry[0]] = entry[1](r.sub(size))


def _write_tagged(w: Writer, get: Callable[..., Any], tag_writers: list) -> None:
    present = []
    for tag, name, enc, dflt in tag_writers:
        v = get(name, _MISSING)
        if v is _MISSING or v == dflt():
            continue  # tagged fields equal to their default are left out of the wire
        sub = Writer()
        enc(sub, v)
        present.append((tag, sub.getvalue()))
    w.uvarint(len(present))
    for tag, data in present:
        w.uvarint(tag)
        w.uvarint(len(data))
        w.buf += data


# --- Bodies by API key ----------------------------------------------------


def _api(api_key: int, version: int, error: type[Exception]) -> Api:
    api = API_BY_KEY.get(api_key)
    if api is None:
        raise error(f"unknown API key {api_key}")
    if not api.min_version <= version <= api.max_version:
        raise error(f"{api.name} v{version} is outside v{api.min_version}-{api.max_version}")
    return api


@cache
def body_codec(api_key: int, version: int, response: bool) -> Compiled:
    """The compiled request (or response) body of an API at a version.

    Raises DecodeError for an unknown key or version: the common caller is the
    decoder of an incoming frame, where those are malformed input.
    """
    api = _api(api_key, version, DecodeError)
    return compile_struct(
        api.response if response else api.request, version, api.is_flexible(version)
    )


def _encoder(api_key: int, version: int, response: bool) -> Compiled:
    _api(api_key, version, EncodeError)
    return body_codec(api_key, version, response)


def encode_request_body(api_key: int, version: int, body: dict) -> bytes:
    w = Writer()
    _encoder(api_key, version, False).encode(w, body)
    return w.getvalue()


def decode_request_body(
    api_key: int, version: int, data: bytes | bytearray | memoryview, offset: int = 0
) -> dict:
    return body_codec(api_key, version, False).decode(Reader(data, offset))


def encode_response_body(api_key: int, version: int, body: dict) -> list[Any]:
    """The response body as parts: bytes, and untouched non-bytes record parts."""
    w = Writer()
    _encoder(api_key, version, True).encode(w, body)
    return w.getparts()


def decode_response_body(
    api_key: int, version: int, data: bytes | bytearray | memoryview, offset: int = 0
) -> dict:
    return body_codec(api_key, version, True).decode(Reader(data, offset))
