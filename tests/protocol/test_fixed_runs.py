"""The codec packs a run of consecutive fixed-width fields in one struct call
(broker/protocol/codec.py, `_fuse_fixed_runs`): the bytes are those written field by
field, and a bad value or a cut input still names its field."""

from __future__ import annotations

import pytest

from broker.protocol.codec import compile_struct
from broker.protocol.types import (
    INT16,
    INT32,
    INT64,
    STRING,
    DecodeError,
    EncodeError,
    Reader,
    Struct,
    Writer,
)
from broker.protocol.types import Field as F

# Two runs (a, b, c) and (e, f) around a string: what a produce partition answer looks like.
S = Struct(
    F("a", INT32), F("b", INT16), F("c", INT64), F("d", STRING), F("e", INT32), F("f", INT64)
)
VALUE = {"a": 7, "b": -2, "c": 1 << 40, "d": "x", "e": 3, "f": -1}


def _encoded(value: dict) -> bytes:
    w = Writer()
    compile_struct(S, 0, False).encode(w, value)
    return bytes(w.getvalue())


def test_a_run_is_written_as_field_by_field_and_read_back():
    w = Writer()
    w.int32(7), w.int16(-2), w.int64(1 << 40), w.int16(1)
    w.buf += b"x"
    w.int32(3), w.int64(-1)
    expected = bytes(w.getvalue())
    assert _encoded(VALUE) == expected
    assert compile_struct(S, 0, False).decode(Reader(expected)) == VALUE


@pytest.mark.parametrize(("field", "bad"), [("b", 1 << 20), ("c", "nine"), ("f", None)])
def test_a_bad_value_in_a_run_names_its_field(field, bad):
    with pytest.raises(EncodeError) as raised:
        _encoded({**VALUE, field: bad})
    assert raised.value.__notes__ == [f"in field {field!r}"]


@pytest.mark.parametrize(("cut", "field"), [(3, "a"), (5, "b"), (13, "c"), (19, "e"), (25, "f")])
def test_input_cut_inside_a_run_names_the_field_cut(cut, field):
    with pytest.raises(DecodeError) as raised:
        compile_struct(S, 0, False).decode(Reader(_encoded(VALUE)[:cut]))
    assert raised.value.__notes__ == [f"in field {field!r}"]
