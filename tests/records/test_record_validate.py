from __future__ import annotations

import struct

import pytest

from broker.protocol.errors import ErrorCode
from broker.records.batch import build_batch
from broker.records.compression import compress
from broker.records.header import compute_crc, set_crc
from broker.records.validate import RecordsError, validate_produce_records

T0 = 1_700_000_000_000
MAX = 1024 * 1024


def batch(codec=0, n=3, **kwargs) -> bytes:
    return build_batch(
        [(b"k%d" % i, b"value %d" % i * 10, T0 + i, []) for i in range(n)], codec=codec, **kwargs
    )


def patched(raw: bytes, fmt: str, pos: int, value: int, fix_crc: bool = True) -> bytes:
    """A copy of `raw` with one header field changed and, by default, a CRC to match."""
    out = bytearray(raw)
    struct.pack_into(fmt, out, pos, value)
    if fix_crc:
        set_crc(out, 0, compute_crc(out, 0, len(out)))
    return bytes(out)


def code_of(buf: bytes, max_bytes: int = MAX, **kwargs) -> int:
    with pytest.raises(RecordsError) as info:
        validate_produce_records(buf, max_bytes, **kwargs)
    return info.value.error_code


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])
def test_valid_batches_pass(codec):
    raw = batch(codec, n=50, producer_id=5, producer_epoch=0, base_sequence=0)
    [(pos, header)] = validate_produce_records(raw, MAX)
    assert pos == 0 and header.records_count == 50 and header.codec == codec


def test_transactional_batch_passes():
    raw = batch(producer_id=5, producer_epoch=0, base_sequence=0, transactional=True)
    assert validate_produce_records(raw, MAX)[0][1].is_transactional


def test_empty_records():
    assert code_of(b"") == ErrorCode.INVALID_RECORD


def test_bad_crc_is_corrupt_message():
    raw = bytearray(batch())
    raw[-1] ^= 0xFF
    assert code_of(bytes(raw)) == ErrorCode.CORRUPT_MESSAGE


def test_truncated_batch_is_corrupt_message():
    raw = batch()
    for cut in (1, 11, 12, 16, 17, 40, 61, len(raw) - 1):
        assert code_of(raw[:cut]) == ErrorCode.CORRUPT_MESSAGE, cut


def test_bad_length_is_corrupt_message():
    raw = batch()
    assert code_of(patched(raw, ">i", 8, 3, fix_crc=False)) == ErrorCode.CORRUPT_MESSAGE
    assert code_of(patched(raw, ">i", 8, 30, fix_crc=False)) == ErrorCode.CORRUPT_MESSAGE
    assert code_of(patched(raw, ">i", 8, -1, fix_crc=False)) == ErrorCode.CORRUPT_MESSAGE


def test_legacy_magic_is_invalid_record():
    # A v1 message: offset, size, crc, magic=1, ... as old clients send it.
    body = struct.pack(">bbqi", 1, 0, T0, -1) + struct.pack(">i", 5) + b"hello"
    message = struct.pack(">I", 0) + body
    legacy = struct.pack(">qi", 0, len(message)) + message
    assert code_of(legacy) == ErrorCode.INVALID_RECORD
    assert code_of(patched(batch(), ">b", 16, 0, fix_crc=False)) == ErrorCode.INVALID_RECORD


def test_unknown_magic_is_corrupt_message():
    assert code_of(patched(batch(), ">b", 16, 3, fix_crc=False)) == ErrorCode.CORRUPT_MESSAGE
    assert code_of(patched(batch(), ">b", 16, -1, fix_crc=False)) == ErrorCode.CORRUPT_MESSAGE


def test_more_than_one_batch_is_invalid_record():
    assert code_of(batch() + batch()) == ErrorCode.INVALID_RECORD


def test_stray_trailing_bytes_are_corrupt_message():
    assert code_of(batch() + b"\x00" * 5) == ErrorCode.CORRUPT_MESSAGE
    # Looks like the start of a second batch, but it is incomplete.
    assert code_of(batch() + batch()[:30]) == ErrorCode.CORRUPT_MESSAGE


def test_nonzero_base_offset_is_invalid_record():
    assert code_of(batch(base_offset=7)) == ErrorCode.INVALID_RECORD


def test_batch_over_the_limit_is_message_too_large():
    raw = batch(n=100)
    assert code_of(raw, max_bytes=len(raw) - 1) == ErrorCode.MESSAGE_TOO_LARGE
    # The limit counts the whole batch, header and log overhead included.
    assert validate_produce_records(raw, len(raw))


def test_count_mismatch_is_invalid_record():
    raw = batch(n=3)
    assert code_of(patched(raw, ">i", 23, 5)) == ErrorCode.INVALID_RECORD  # lastOffsetDelta
    assert code_of(patched(raw, ">i", 57, 4)) == ErrorCode.INVALID_RECORD  # recordsCount


def test_zero_or_negative_count_is_invalid_record():
    raw = batch(n=1)
    assert code_of(patched(patched(raw, ">i", 57, 0), ">i", 23, -1)) == ErrorCode.INVALID_RECORD
    assert code_of(patched(patched(raw, ">i", 57, -2), ">i", 23, -3)) == ErrorCode.INVALID_RECORD


def test_control_batch_from_a_client_is_invalid_record():
    assert code_of(batch(is_control=True)) == ErrorCode.INVALID_RECORD


def test_producer_id_without_sequence_is_invalid_record():
    assert (
        code_of(batch(producer_id=5, producer_epoch=0, base_sequence=-1))
        == ErrorCode.INVALID_RECORD
    )


def test_unknown_codec_is_invalid_record():
    raw = batch()
    attributes = struct.unpack_from(">h", raw, 21)[0]
    assert code_of(patched(raw, ">h", 21, attributes | 0x07)) == ErrorCode.INVALID_RECORD


def test_undecompressable_payload_is_invalid_record():
    # A gzip batch whose payload is not gzip, with a CRC that matches (a client bug).
    raw = batch(codec=1)
    broken = bytearray(raw[:61]) + b"not gzip at all"
    struct.pack_into(">i", broken, 8, len(broken) - 12)
    set_crc(broken, 0, compute_crc(broken, 0, len(broken)))
    assert code_of(bytes(broken)) == ErrorCode.INVALID_RECORD


def test_malformed_records_are_invalid_record():
    raw = bytearray(batch(n=2))
    raw[61] = 0x7E  # first record length: 63 bytes, more than it holds
    set_crc(raw, 0, compute_crc(raw, 0, len(raw)))
    assert code_of(bytes(raw)) == ErrorCode.INVALID_RECORD


def test_compression_bomb_is_invalid_record():
    bomb = compress(4, bytes(50 * 1024 * 1024))
    raw = bytearray(batch(codec=4, n=1)[:61]) + bomb
    struct.pack_into(">i", raw, 8, len(raw) - 12)
    set_crc(raw, 0, compute_crc(raw, 0, len(raw)))
    assert code_of(bytes(raw), max_uncompressed_bytes=1024 * 1024) == ErrorCode.INVALID_RECORD


def test_zstd_needs_produce_v7():
    raw = batch(codec=4)
    assert code_of(raw, produce_version=6) == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
    assert validate_produce_records(raw, MAX, produce_version=7)
    assert validate_produce_records(batch(codec=3), MAX, produce_version=3)


def test_error_carries_a_message():
    with pytest.raises(RecordsError) as info:
        validate_produce_records(batch() + batch(), MAX)
    assert "exactly one record batch" in info.value.message
    assert info.value.error_code == 87


def test_framing_check_passes_a_record_whose_fields_are_broken_full_parse_refuses_it():
    """The default check walks record lengths only; `parse_every_record` decodes fields."""
    raw = bytearray(build_batch([(b"key", b"value", 1000, [])]))
    # The record: length, attributes, ts delta, offset delta, key length (zigzag 3 = 6)...
    # Claim a key of 60 bytes: the framing is intact, the fields are not.
    key_len_at = 61 + 1 + 1 + 1 + 1
    assert raw[key_len_at] == 6
    raw[key_len_at] = 120
    set_crc(raw, 0, compute_crc(raw, 0, len(raw)))
    assert validate_produce_records(bytes(raw), MAX)
    with pytest.raises(RecordsError) as info:
        validate_produce_records(bytes(raw), MAX, parse_every_record=True)
    assert info.value.error_code == ErrorCode.INVALID_RECORD


def test_a_record_length_that_is_no_varint_is_an_invalid_record():
    """Found by the fuzz test: a length of ten continuation bytes must be refused with
    INVALID_RECORD like any other broken framing, not escape as another exception."""
    raw = bytearray(build_batch([(None, b"v", 1000, [])]))
    at = 61  # the first record's length
    raw[at:] = b"\x80" * 11
    struct.pack_into(">i", raw, 8, len(raw) - 12)  # batch_length
    set_crc(raw, 0, compute_crc(raw, 0, len(raw)))
    assert code_of(bytes(raw)) == ErrorCode.INVALID_RECORD
