from __future__ import annotations

import gzip
import os
import struct

import cramjam
import pytest

from broker.records.compression import (
    CODEC_NAMES,
    XERIAL_BLOCK_SIZE,
    XERIAL_MAGIC,
    CompressionError,
    compress,
    decompress,
)
from broker.records.header import CODEC_GZIP, CODEC_LZ4, CODEC_NONE, CODEC_SNAPPY, CODEC_ZSTD

CODECS = [CODEC_NONE, CODEC_GZIP, CODEC_SNAPPY, CODEC_LZ4, CODEC_ZSTD]
COMPRESSED = CODECS[1:]

PAYLOADS = {
    "empty": b"",
    "one byte": b"x",
    "text": b"the quick brown fox jumps over the lazy dog " * 500,
    "random": os.urandom(150_000),
    # Crosses several xerial (32 KiB) and lz4 (64 KiB) block boundaries, unevenly.
    "mixed": os.urandom(40_000) + b"abc" * 90_001 + os.urandom(70_001),
}


def test_codec_names_match_the_header_numbers():
    assert CODEC_NAMES == {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("name", PAYLOADS)
def test_round_trip(codec, name):
    data = PAYLOADS[name]
    assert decompress(codec, compress(codec, data)) == data


@pytest.mark.parametrize("codec", COMPRESSED)
@pytest.mark.parametrize("level", [1, 9])
def test_round_trip_with_level(codec, level):
    data = PAYLOADS["mixed"]
    assert decompress(codec, compress(codec, data, level)) == data


@pytest.mark.parametrize("codec", COMPRESSED)
def test_compressible_data_shrinks(codec):
    data = PAYLOADS["text"]
    assert len(compress(codec, data)) < len(data) // 5


def test_decompress_accepts_memoryview_and_bytearray():
    packed = compress(CODEC_SNAPPY, PAYLOADS["text"])
    assert decompress(CODEC_SNAPPY, memoryview(packed)) == PAYLOADS["text"]
    assert decompress(CODEC_SNAPPY, bytearray(packed)) == PAYLOADS["text"]


# --- snappy framing ---------------------------------------------------------------


def test_snappy_is_xerial_framed_in_32k_chunks():
    data = PAYLOADS["mixed"]
    packed = compress(CODEC_SNAPPY, data)
    assert packed[:8] == XERIAL_MAGIC
    assert struct.unpack(">ii", packed[8:16]) == (1, 1)
    pos, chunks = 16, []
    while pos < len(packed):
        (length,) = struct.unpack_from(">i", packed, pos)
        chunks.append(bytes(cramjam.snappy.decompress_raw(packed[pos + 4 : pos + 4 + length])))
        pos += 4 + length
    assert pos == len(packed)
    assert all(len(chunk) == XERIAL_BLOCK_SIZE for chunk in chunks[:-1])
    assert b"".join(chunks) == data


def test_snappy_reads_raw_unframed_blocks():
    data = PAYLOADS["mixed"]
    assert decompress(CODEC_SNAPPY, bytes(cramjam.snappy.compress_raw(data))) == data


def test_snappy_interoperates_with_kafka_python_xerial(kafka_python_codecs):
    data = PAYLOADS["mixed"]
    assert kafka_python_codecs.snappy_decode(compress(CODEC_SNAPPY, data)) == data
    assert decompress(CODEC_SNAPPY, kafka_python_codecs.snappy_encode(data)) == data
    # kafka-python's framing with a non-default chunk size, and its raw mode.
    theirs = kafka_python_codecs.snappy_encode(data, xerial_blocksize=1000)
    assert decompress(CODEC_SNAPPY, theirs) == data
    raw = kafka_python_codecs.snappy_encode(data, xerial_compatible=False)
    assert decompress(CODEC_SNAPPY, raw) == data


# --- gzip -------------------------------------------------------------------------


def test_gzip_interoperates_with_kafka_python():
    from kafka.codec import gzip_decode, gzip_encode

    data = PAYLOADS["mixed"]
    assert gzip_decode(compress(CODEC_GZIP, data)) == data
    assert decompress(CODEC_GZIP, gzip_encode(data)) == data


def test_gzip_reads_concatenated_members():
    assert decompress(CODEC_GZIP, gzip.compress(b"abc") + gzip.compress(b"def")) == b"abcdef"


# --- lz4 frame --------------------------------------------------------------------


def test_lz4_frame_is_written_like_the_java_client():
    packed = compress(CODEC_LZ4, PAYLOADS["mixed"])
    assert packed[:4] == b"\x04\x22\x4d\x18"
    flg, bd = packed[4], packed[5]
    assert flg >> 6 == 1  # frame version 01
    assert flg & 0x20  # independent blocks: the Java reader needs them
    assert not flg & 0x10 and not flg & 0x08 and not flg & 0x04  # no checksums/size
    assert bd == 0x40  # 64 KiB maximum block size
    assert packed.endswith(b"\x00\x00\x00\x00")


def test_lz4_frame_is_read_by_the_reference_decoder():
    # cramjam's frame decoder is the lz4 library's; it also checks our header checksum.
    for data in PAYLOADS.values():
        assert bytes(cramjam.lz4.decompress(compress(CODEC_LZ4, data))) == data


def test_lz4_reads_linked_and_checksummed_frames():
    data = PAYLOADS["mixed"]
    for content_checksum in (None, False, True):
        for block_linked in (None, False, True):
            encoder = cramjam.lz4.Compressor(
                content_checksum=content_checksum, block_linked=block_linked
            )
            encoder.compress(data)
            assert decompress(CODEC_LZ4, bytes(encoder.finish())) == data


# --- zstd -------------------------------------------------------------------------


def test_zstd_reads_streamed_frames_without_content_size():
    data = PAYLOADS["mixed"]
    encoder = cramjam.zstd.Compressor()
    for start in range(0, len(data), 10_000):
        encoder.compress(data[start : start + 10_000])
    assert decompress(CODEC_ZSTD, bytes(encoder.finish())) == data


def _zstd_rle_frame(blocks: int, block_size: int = 128 * 1024) -> bytes:
    """A zstd frame without content size made of RLE blocks: tiny, inflating hugely."""
    out = bytearray(struct.pack("<I", 0xFD2FB528))
    out.append(0x00)  # no content size, not single segment, no checksum
    out.append(0x58)  # window descriptor: 2 MiB
    for i in range(blocks):
        last = 1 if i == blocks - 1 else 0
        header = (block_size << 3) | (1 << 1) | last
        out += header.to_bytes(3, "little") + b"z"
    return bytes(out)


def test_handmade_zstd_rle_frame_is_valid():
    assert bytes(cramjam.zstd.decompress(_zstd_rle_frame(3))) == b"z" * 3 * 128 * 1024
    assert decompress(CODEC_ZSTD, _zstd_rle_frame(3)) == b"z" * 3 * 128 * 1024


# --- bounds -----------------------------------------------------------------------


def _bombs() -> dict[str, tuple[int, bytes]]:
    zeros = bytes(20 * 1024 * 1024)
    return {
        "gzip": (CODEC_GZIP, gzip.compress(zeros)),
        "snappy xerial": (CODEC_SNAPPY, compress(CODEC_SNAPPY, zeros)),
        "snappy raw": (CODEC_SNAPPY, bytes(cramjam.snappy.compress_raw(zeros))),
        "lz4": (CODEC_LZ4, compress(CODEC_LZ4, zeros)),
        "lz4 linked": (CODEC_LZ4, bytes(cramjam.lz4.compress(zeros))),
        "zstd": (CODEC_ZSTD, compress(CODEC_ZSTD, zeros)),
        "zstd rle no size": (CODEC_ZSTD, _zstd_rle_frame(160)),
    }


@pytest.mark.parametrize("name", list(_bombs()))
def test_decompression_is_bounded(name):
    codec, packed = _bombs()[name]
    with pytest.raises(CompressionError, match="exceeds"):
        decompress(codec, packed, max_size=1024 * 1024)
    # The same input inflates when the bound allows it.
    assert len(decompress(codec, packed, max_size=64 * 1024 * 1024)) >= 20 * 1024 * 1024


def test_a_giant_claim_is_refused_before_inflating():
    # 20,000 RLE blocks claim 2.5 GiB; the bound check refuses without allocating it.
    with pytest.raises(CompressionError, match="exceeds"):
        decompress(CODEC_ZSTD, _zstd_rle_frame(20_000))


def test_output_exactly_at_the_bound_is_accepted():
    data = os.urandom(1000)
    for codec in COMPRESSED:
        assert decompress(codec, compress(codec, data), max_size=1000) == data
        with pytest.raises(CompressionError):
            decompress(codec, compress(codec, data), max_size=999)


# --- corruption -------------------------------------------------------------------


@pytest.mark.parametrize("codec", COMPRESSED)
def test_truncated_input_raises_compression_error(codec):
    packed = compress(codec, PAYLOADS["mixed"])
    for cut in (0, 1, 5, 17, len(packed) // 2, len(packed) - 1):
        with pytest.raises(CompressionError):
            decompress(codec, packed[:cut])


@pytest.mark.parametrize("codec", COMPRESSED)
def test_garbage_raises_compression_error(codec):
    for garbage in (b"\xff" * 64, b"hello world, this is not compressed", os.urandom(300)):
        with pytest.raises(CompressionError):
            decompress(codec, garbage)


@pytest.mark.parametrize("codec", [5, 6, 7, -1])
def test_unknown_codec(codec):
    with pytest.raises(CompressionError):
        compress(codec, b"x")
    with pytest.raises(CompressionError):
        decompress(codec, b"x")
