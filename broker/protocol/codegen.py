"""Straight-line Python for one struct at one version, as Kafka generates a class per
message from its JSON (issue 23: the codec was ~40 % of an unbatched Produce's CPU and
~30 % of a 10,000-partition failover's).

`broker.protocol.codec` keeps the declarations as the single source and its closure
codec as the reference: it loops over (name, function) pairs, a Python call per field.
Here the same declaration becomes the source of two functions, built with `exec` once
per (struct, version, flexible): fields read and written in order with the reader's
position in a local; runs of fixed-width fields (and the int16/int32 length before a
string, bytes or array) in ONE precompiled `struct.Struct` call; the result dict built
as one literal. Nested structs call each other's generated functions directly.

Errors are not generated: on any exception the generated function is abandoned, the
reader or writer put back where it was, and the closure codec run instead; it raises
the precise DecodeError/EncodeError with its "in field" notes (or, were the generated
code ever stricter, gives the right answer). So the fast path only has to be right on
well-formed input, and the equivalence of both on every declared struct and version is
what tests/protocol/test_protocol_codegen.py checks.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable
from typing import Any

from .types import (
    Array,
    Fixed,
    Reader,
    Struct,
    Type,
    Writer,
    default_of,
    in_range,
    on_the_wire,
)

# struct codes of the fixed-width types ('?' reads any non-zero byte as True, as
# Reader.bool does, and writes truthiness as 0/1, as Writer.bool does)
_CODES = {
    "int8": "b",
    "int16": "h",
    "uint16": "H",
    "int32": "i",
    "uint32": "I",
    "int64": "q",
    "float64": "d",
    "bool": "?",
}


class Abandon(Exception):
    """The generated code met input it does not handle: the closure codec decides."""


def _is_fixed(t: Type) -> bool:
    return isinstance(t, Fixed) and t.name in _CODES


class _Source:
    """Lines of a function being generated, and the names its code refers to."""

    def __init__(self, namespace: dict[str, Any]) -> None:
        self.lines: list[str] = []
        self.ns = namespace

    def add(self, line: str, depth: int = 1) -> None:
        self.lines.append("    " * depth + line)

    def name(self, prefix: str, value: Any) -> str:
        key = f"{prefix}{len(self.ns)}"
        self.ns[key] = value
        return key


def generate(
    s: Struct,
    version: int,
    flexible: bool,
    child: Callable[[Struct], Any],
    element: Callable[[Type, bool], Any],
    tagged: tuple[Callable, Callable, Any, Any],
    encoded: type,
) -> tuple[Callable[[Reader], dict], Callable[[Writer, dict], None]]:
    """The generated (decode, encode) of `s` at `version`. `child(struct)` gives a
    nested struct's compiled codec (with `fast_decode`/`fast_encode`); `element(type,
    nullable)` a non-struct type's closure (decoder, encoder) for what is not inlined;
    `tagged` = (read_tagged, write_tagged, tag_readers, tag_writers) of the closure
    codec, which tagged fields (rare, flexible only) go through; `encoded` the class of
    values already encoded (copied as they are)."""
    # Tagged fields start as their default, overwritten when present (as the closure).
    plain = [f for f in s.fields if on_the_wire(f, version, flexible) and f.tag is None]
    absent = [f for f in s.fields if f not in plain]
    ns: dict[str, Any] = {
        "Abandon": Abandon,
        "UUID": uuid.UUID,
        "unpack_from": struct.unpack_from,
        "pack": struct.pack,
        "read_tagged": tagged[0],
        "write_tagged": tagged[1],
        "TAG_READERS": tagged[2],
        "TAG_WRITERS": tagged[3],
        "Encoded": encoded,
    }
    dec = _decoder(plain, absent, version, flexible, child, element, ns)
    enc = _encoder(plain, version, flexible, child, element, ns)
    code = "\n".join(["def decode(r):", *dec.lines, "", "def encode(w, value):", *enc.lines])
    exec(compile(code, f"<codegen {len(plain)} fields v{version}>", "exec"), ns)
    return ns["decode"], ns["encode"]


# --- decode ---------------------------------------------------------------------------


def _decoder(plain, absent, version, flexible, child, element, ns) -> _Source:
    src = _Source(ns)
    src.add("buf = r.buf; pos = r.pos; end = r.end")
    run: list[tuple[str, Fixed]] = []  # fixed-width fields not read yet

    def flush(length: str | None = None) -> None:
        """Read the pending fixed fields, plus an int16/int32 length (into `n`)."""
        fmt = "".join(_CODES[t.name] for _, t in run) + (length or "")
        if not fmt:
            return
        st = struct.Struct(">" + fmt)
        names = [v for v, _ in run] + (["n"] if length else [])
        src.add(f"q = pos + {st.size}")
        src.add("if q > end: raise Abandon")
        src.add(f"{', '.join(names)}, = {src.name('S', st)}.unpack_from(buf, pos)")
        src.add("pos = q")
        run.clear()

    def length(wide: bool) -> None:
        if flexible:
            flush()
            # Most compact lengths are one byte: no call for them; the Reader reads others.
            src.add("if pos < end and buf[pos] < 0x80: n = buf[pos] - 1; pos += 1")
            src.add("else: r.pos = pos; n = r.uvarint() - 1; pos = r.pos")
        else:
            flush("i" if wide else "h")

    def null_or(var: str, nullable: bool) -> None:
        """After a length in `n`: None for -1 where allowed; any other negative abandons."""
        if nullable:
            src.add("if n < 0:")
            src.add("if n != -1: raise Abandon", 2)
            src.add(f"{var} = None", 2)
            src.add("else:")
        else:
            src.add("if n < 0: raise Abandon")
            src.add("if True:")

    for i, f in enumerate(plain):
        var = f"f{i}"
        t = f.type
        nullable = in_range(version, f.nullable)
        if _is_fixed(t):
            run.append((var, t))
            continue
        if t.name == "uuid":
            flush()
            src.add("q = pos + 16")
            src.add("if q > end: raise Abandon")
            src.add(f"{var} = UUID(bytes=bytes(buf[pos:q])); pos = q")
        elif t.name in ("string", "bytes", "records"):
            length(wide=t.name != "string")
            null_or(var, nullable)
            src.add("q = pos + n", 2)
            src.add("if q > end: raise Abandon", 2)
            read = {
                "string": "str(buf[pos:q], 'utf-8')",
                "bytes": "bytes(buf[pos:q])",
                "records": "buf[pos:q]",
            }[t.name]
            src.add(f"{var} = {read}; pos = q", 2)
        elif isinstance(t, Struct):
            flush()
            src.add(f"r.pos = pos; {var} = {src.name('D', child(t).fast_decode)}(r); pos = r.pos")
        elif isinstance(t, Array):
            length(wide=True)
            null_or(var, nullable)
            e = t.element
            if _is_fixed(e) and e.fmt is not None:
                src.add(f"q = pos + n * {e.size}", 2)
                src.add("if q > end: raise Abandon", 2)
                src.add(f"{var} = list(unpack_from(f'>{{n}}{e.fmt}', buf, pos)); pos = q", 2)
            else:
                if isinstance(e, Struct):
                    c = child(e)
                    each, least = c.fast_decode, max(1, c.min_size)
                else:
                    each, least = element(e, False)[0], max(1, e.min_size(flexible))
                src.add(f"if n * {least} > end - pos: raise Abandon", 2)
                each_name = src.name("D", each)
                src.add(f"r.pos = pos; {var} = [{each_name}(r) for _ in range(n)]; pos = r.pos", 2)
        else:  # a type this generator does not inline: its closure reads it
            flush()
            read = src.name("D", element(t, nullable)[0])
            src.add(f"r.pos = pos; {var} = {read}(r); pos = r.pos")
    flush()
    items = [f"{f.name!r}: f{i}" for i, f in enumerate(plain)]
    for f in absent:
        items.append(f"{f.name!r}: {_default_expr(src, f, version)}")
    src.add("out = {" + ", ".join(items) + "}")
    if flexible:  # mostly no tagged fields: a zero count, read here
        src.add("if pos < end and buf[pos] == 0: r.pos = pos + 1")
        src.add("else: r.pos = pos; read_tagged(r, out, TAG_READERS)")
    else:
        src.add("r.pos = pos")
    src.add("return out")
    return src


def _default_expr(src: _Source, f, version: int) -> str:
    """An expression for `f`'s default: a constant, or a fresh list/dict each time."""
    value = default_of(f, version)
    if isinstance(value, list | dict):
        return f"{src.name('F', lambda: default_of(f, version))}()"
    return src.name("K", value)


# --- encode ---------------------------------------------------------------------------

_NULL_LENGTH = {  # (flexible, wide) -> the encoding of a null length
    (True, False): b"\x00",
    (True, True): b"\x00",
    (False, False): struct.pack(">h", -1),
    (False, True): struct.pack(">i", -1),
}


def _encoder(plain, version, flexible, child, element, ns) -> _Source:
    src = _Source(ns)
    src.add("if value.__class__ is Encoded:")
    src.add("w.buf += value", 2)
    src.add("return", 2)
    run: list[str] = []  # values of fixed fields not written yet
    codes: list[str] = []

    def flush() -> None:
        if run:
            st = struct.Struct(">" + "".join(codes))
            src.add(f"w.buf += {src.name('S', st)}.pack({', '.join(run)})")
            run.clear()
            codes.clear()

    def length(n: str, wide: bool) -> None:
        if flexible:
            flush()
            src.add(f"m = {n} + 1", 2)
            src.add("if m < 0x80: w.buf.append(m)", 2)
            src.add("else: w.uvarint(m)", 2)
        else:
            flush()
            code = "i" if wide else "h"
            src.add(f"w.buf += {src.name('S', struct.Struct('>' + code))}.pack({n})", 2)

    def null_or(var: str, nullable: bool, wide: bool) -> None:
        flush()
        src.add(f"if {var} is None:")
        if nullable:
            src.add(f"w.buf += {src.name('K', _NULL_LENGTH[flexible, wide])}", 2)
        else:
            src.add("raise Abandon", 2)
        src.add("else:")

    for i, f in enumerate(plain):
        var = f"v{i}"
        t = f.type
        nullable = in_range(version, f.nullable)
        # A subscript costs less than get() and a test; absent keys (defaults) are rarer.
        src.add(f"try: {var} = value[{f.name!r}]")
        src.add(f"except KeyError: {var} = {_default_expr(src, f, version)}")
        if _is_fixed(t):
            run.append(var)
            codes.append(_CODES[t.name])
            continue
        if t.name == "uuid":
            flush()
            src.add(f"w.buf += {var}.bytes")
        elif t.name == "string":
            null_or(var, nullable, wide=False)
            src.add(f"d = {var}.encode('utf-8')", 2)
            if not flexible:
                src.add("if len(d) > 0x7FFF: raise Abandon", 2)
            length("len(d)", wide=False)
            src.add("w.buf += d", 2)
        elif t.name == "bytes":
            null_or(var, nullable, wide=True)
            length(f"len({var})", wide=True)
            src.add(f"w.raw({var})", 2)
        elif isinstance(t, Struct):
            flush()
            src.add(f"{src.name('E', child(t).fast_encode)}(w, {var})")
        elif isinstance(t, Array):
            null_or(var, nullable, wide=True)
            length(f"len({var})", wide=True)
            e = t.element
            if _is_fixed(e) and e.fmt is not None:
                src.add(f"w.buf += pack(f'>{{len({var})}}{e.fmt}', *{var})", 2)
            else:
                each = child(e).fast_encode if isinstance(e, Struct) else element(e, False)[1]
                src.add(f"for x in {var}: {src.name('E', each)}(w, x)", 2)
        else:  # records and anything not inlined: its closure writes it
            flush()
            src.add(f"{src.name('E', element(t, nullable)[1])}(w, {var})")
    flush()
    if flexible and ns["TAG_WRITERS"]:
        src.add("write_tagged(w, value.get, TAG_WRITERS)")
    elif flexible:
        src.add("w.buf.append(0)  # no tagged fields in this struct")
    return src
