"""Primitive types, the bounded Reader, the parts-collecting Writer, the error table."""

from __future__ import annotations

import time
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.protocol.codec import compile_type, decode_request_body
from broker.protocol.errors import ErrorCode, retriable
from broker.protocol.types import (
    BYTES,
    STRING,
    DecodeError,
    Reader,
    Writer,
    parse_versions,
)


def h(text: str) -> bytes:
    return bytes.fromhex(text.replace(" ", ""))


@pytest.mark.parametrize(
    ("value", "encoded"),
    [(0, "00"), (-1, "01"), (1, "02"), (63, "7e"), (-64, "7f"), (64, "8001"), (-65, "8101"),
     (2**31 - 1, "feffffff0f"), (-(2**31), "ffffffff0f")],
)  # fmt: skip
def test_zigzag_varint(value, encoded):
    w = Writer()
    w.varint(value)
    assert w.getvalue() == h(encoded)
    assert Reader(h(encoded)).varint() == value


@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        (0, "00"),
        (-1, "01"),
        (2**63 - 1, "feffffffffffffffff01"),
        (-(2**63), "ffffffffffffffffff01"),
    ],
)
def test_zigzag_varlong(value, encoded):
    w = Writer()
    w.varlong(value)
    assert w.getvalue() == h(encoded)
    assert Reader(h(encoded)).varlong() == value


def test_unsigned_varint():
    w = Writer()
    w.uvarint(300)
    w.uvarint(0)
    w.uvarint(2**32 - 1)
    assert w.getvalue() == h("ac02 00 ffffffff0f")
    r = Reader(w.getvalue())
    assert (r.uvarint(), r.uvarint(), r.uvarint()) == (300, 0, 2**32 - 1)
    assert r.remaining() == 0


@pytest.mark.parametrize("data", ["", "80", "ffffffff", "ffffffffff01"])
def test_bad_varints(data):
    with pytest.raises(DecodeError):
        Reader(h(data)).uvarint()


@given(st.integers(-(2**63), 2**63 - 1))
def test_varlong_round_trip(v):
    w = Writer()
    w.varlong(v)
    assert Reader(w.getvalue()).varlong() == v


def test_fixed_width_and_uuid():
    w = Writer()
    u = uuid.uuid4()
    w.int8(-2)
    w.int16(-3)
    w.uint16(65535)
    w.int32(-4)
    w.uint32(2**32 - 1)
    w.int64(-5)
    w.float64(1.5)
    w.bool(True)
    w.uuid(u)
    r = Reader(w.getvalue())
    assert [r.int8(), r.int16(), r.uint16(), r.int32(), r.uint32(), r.int64(), r.float64()] == [
        -2, -3, 65535, -4, 2**32 - 1, -5, 1.5,
    ]  # fmt: skip
    assert r.bool() is True
    assert r.uuid() == u
    with pytest.raises(DecodeError):
        r.int8()


def test_reader_is_bounded_by_end_and_offset():
    r = Reader(b"abcdef", 2, 4)
    assert r.bytes(2) == b"cd"
    with pytest.raises(DecodeError):
        r.int8()
    with pytest.raises(DecodeError):
        Reader(b"abc", 4)
    with pytest.raises(DecodeError):
        Reader(b"abcd").bytes(-1)
    sub = Reader(b"abcdef").sub(3)
    assert sub.remaining() == 3


def _string(flexible: bool, nullable: bool):
    return compile_type(STRING, 0, flexible, nullable)


def test_strings_classic_and_compact():
    for flexible, encoded in ((False, "0003 616263"), (True, "04 616263")):
        c = _string(flexible, True)
        w = Writer()
        c.encode(w, "abc")
        assert w.getvalue() == h(encoded)
        assert c.decode(Reader(h(encoded))) == "abc"
    assert _string(False, True).decode(Reader(h("ffff"))) is None
    assert _string(True, True).decode(Reader(h("00"))) is None
    with pytest.raises(DecodeError):
        _string(False, False).decode(Reader(h("ffff")))
    with pytest.raises(DecodeError):
        _string(False, True).decode(Reader(h("fffe")))
    with pytest.raises(DecodeError):
        _string(False, False).decode(Reader(h("0002 ff fe")))  # not UTF-8
    with pytest.raises(DecodeError):
        _string(True, False).decode(Reader(h("ffffffff0f 00")))  # 4 GiB claimed


def test_bytes_classic_and_compact():
    c = compile_type(BYTES, 0, False, False)
    w = Writer()
    c.encode(w, b"xy")
    assert w.getvalue() == h("00000002 7879")
    with pytest.raises(DecodeError):
        c.decode(Reader(h("7fffffff 00")))
    cc = compile_type(BYTES, 0, True, True)
    assert cc.decode(Reader(h("03 7879"))) == b"xy"
    assert cc.decode(Reader(h("00"))) is None


def test_huge_array_count_fails_fast():
    # Metadata v1: topics = int32 count; 2**31-1 elements claimed, 10 bytes present.
    data = h("7fffffff") + bytes(10)
    start = time.perf_counter()
    with pytest.raises(DecodeError):
        decode_request_body(3, 1, data)
    # DeleteTopics v1: array of strings, same story
    with pytest.raises(DecodeError):
        decode_request_body(20, 1, data)
    # Produce v3: a topic whose partition_data claims 2**31-1 entries
    with pytest.raises(DecodeError):
        decode_request_body(0, 3, h("ffff 0001 00000000 00000001 0001 61 7fffffff") + bytes(8))
    assert time.perf_counter() - start < 0.1


def test_writer_parts_keep_large_bytes_and_objects_by_reference():
    big = b"x" * 5000
    marker = object.__new__(type("Region", (), {"__len__": lambda self: 10}))
    w = Writer(size_prefix=True)
    w.int32(1)
    w.raw(big)
    w.int16(2)
    w.part(marker)
    w.int8(3)
    parts = w.getparts()
    assert len(parts) == 3 and parts[1] is marker
    assert parts[0] == (4 + 5000 + 2 + 10 + 1).to_bytes(4, "big") + h("00000001") + big + h("0002")
    assert parts[2] == h("03")


def test_parse_versions():
    assert parse_versions("3+") == (3, 0x7FFF)
    assert parse_versions("0-7") == (0, 7)
    assert parse_versions("5") == (5, 5)
    assert parse_versions("none") is None


def test_error_codes_and_retriable():
    assert ErrorCode.NONE == 0 and ErrorCode.UNKNOWN_SERVER_ERROR == -1
    assert ErrorCode.NOT_LEADER_OR_FOLLOWER == 6
    assert ErrorCode.UNSUPPORTED_VERSION == 35
    assert ErrorCode.INVALID_RECORD == 87
    assert ErrorCode(59).name == "UNKNOWN_PRODUCER_ID"
    assert retriable(ErrorCode.NOT_LEADER_OR_FOLLOWER)
    assert retriable(ErrorCode.LEADER_NOT_AVAILABLE)
    assert retriable(ErrorCode.COORDINATOR_NOT_AVAILABLE)
    assert retriable(7)  # REQUEST_TIMED_OUT
    assert not retriable(ErrorCode.NONE)
    assert not retriable(ErrorCode.UNSUPPORTED_VERSION)
    assert not retriable(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER)
    assert not retriable(12345)
