"""The record-batch codecs as Kafka frames them: gzip, snappy, lz4 and zstd.

The codec bytes are cramjam's (and zlib's); the framing around them is Kafka's and
lives here, because each client is picky about it:

- gzip: one gzip stream (concatenated members are accepted when reading).
- snappy: the Java client writes xerial framing (b"\\x82SNAPPY\\x00", version and
  compat int32 = 1, then [int32 length][raw snappy block] chunks of 32 KiB input);
  librdkafka and old clients may write one raw snappy block, so reading takes both.
- lz4: an LZ4 frame with independent blocks. We write the frame ourselves, exactly
  like the Java client (64 KiB blocks, no block or content checksum), because
  cramjam's frame encoder links blocks by default, which some readers reject.
- zstd: one zstd frame.

Decompression of untrusted bytes is bounded by `max_size` (default 64 MiB): before
anything is inflated, the frame headers are walked to bound the output, so a few
kilobytes claiming gigabytes are refused without allocating them. The default is far
above any real batch (message.max.bytes defaults to 1 MiB of compressed bytes) yet
small enough that a handful of concurrent bombs cannot exhaust the broker.
"""

from __future__ import annotations

import struct
import zlib

import cramjam

from broker.records.header import CODEC_GZIP, CODEC_LZ4, CODEC_NONE, CODEC_SNAPPY, CODEC_ZSTD

CODEC_NAMES = {
    "none": CODEC_NONE,
    "gzip": CODEC_GZIP,
    "snappy": CODEC_SNAPPY,
    "lz4": CODEC_LZ4,
    "zstd": CODEC_ZSTD,
}

DEFAULT_MAX_SIZE = 64 * 1024 * 1024


class CompressionError(ValueError):
    """Corrupt compressed data, an unknown codec, or output above the size bound."""


def compress(codec: int, data: bytes, level: int | None = None) -> bytes:
    """Compress `data` framed the way Kafka clients expect for `codec`."""
    if codec == CODEC_NONE:
        return bytes(data)
    if codec == CODEC_GZIP:
        return bytes(cramjam.gzip.compress(data, level=6 if level is None else level))
    if codec == CODEC_SNAPPY:
        return _xerial_compress(data)
    if codec == CODEC_LZ4:
        return _lz4_frame_compress(data, level)
    if codec == CODEC_ZSTD:
        # zstd's own default level (3), as the Java client and librdkafka use.
        return bytes(cramjam.zstd.compress(data, level=3 if level is None else level))
    raise CompressionError(f"unknown compression codec {codec}")


def decompress(codec: int, data, max_size: int = DEFAULT_MAX_SIZE) -> bytes:
    """Inflate `data`; raises CompressionError (only) on anything wrong.

    `max_size` bounds the output: larger output raises CompressionError.
    """
    try:
        if codec == CODEC_NONE:
            out = bytes(data)
        elif codec == CODEC_GZIP:
            out = _gzip_decompress(data, max_size)
        elif codec == CODEC_SNAPPY:
            out = _snappy_decompress(memoryview(data), max_size)
        elif codec == CODEC_LZ4:
            _check_bound(_lz4_frames_bound(memoryview(data)), max_size)
            out = bytes(cramjam.lz4.decompress(bytes(data)))
        elif codec == CODEC_ZSTD:
            _check_bound(_zstd_frames_bound(memoryview(data)), max_size)
            out = bytes(cramjam.zstd.decompress(bytes(data)))
        else:
            raise CompressionError(f"unknown compression codec {codec}")
    except CompressionError:
        raise
    except Exception as exc:  # cramjam/zlib/struct errors all mean "corrupt input" here
        raise CompressionError(f"corrupt {_name(codec)} data: {exc}") from exc
    _check_bound(len(out), max_size)
    return out


def _name(codec: int) -> str:
    for name, number in CODEC_NAMES.items():
        if number == codec:
            return name
    return f"codec {codec}"


def _check_bound(size: int, max_size: int) -> None:
    if size > max_size:
        raise CompressionError(f"decompressed size {size} exceeds the limit of {max_size} bytes")


# --- gzip -------------------------------------------------------------------------


def _gzip_decompress(data, max_size: int) -> bytes:
    # zlib's max_length stops inflating at the bound, which cramjam cannot do.
    parts = []
    total = 0
    rest = bytes(data)
    if not rest:
        raise CompressionError("empty gzip stream")
    while rest:
        inflater = zlib.decompressobj(wbits=31)
        chunk = inflater.decompress(rest, max_size + 1 - total)
        total += len(chunk)
        parts.append(chunk)
        _check_bound(total, max_size)
        if inflater.unconsumed_tail:
            # Input remains only because the output hit the bound.
            _check_bound(max_size + 1, max_size)
        if not inflater.eof:
            raise CompressionError("truncated gzip stream")
        rest = inflater.unused_data
    return b"".join(parts)


# --- snappy -----------------------------------------------------------------------

XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
XERIAL_BLOCK_SIZE = 32 * 1024
_INT32 = struct.Struct(">i")


def _xerial_compress(data) -> bytes:
    view = memoryview(data)
    out = bytearray(_XERIAL_HEADER)
    compress_raw = cramjam.snappy.compress_raw
    for start in range(0, len(view), XERIAL_BLOCK_SIZE):
        block = compress_raw(view[start : start + XERIAL_BLOCK_SIZE])
        out += _INT32.pack(len(block))
        out += block
    return bytes(out)


def _snappy_decompress(view: memoryview, max_size: int) -> bytes:
    if len(view) >= len(_XERIAL_HEADER) and view[:8] == XERIAL_MAGIC:
        parts = []
        total = 0
        pos = len(_XERIAL_HEADER)  # version and compat are ignored, as every reader does
        while pos < len(view):
            if pos + 4 > len(view):
                raise CompressionError("truncated xerial snappy chunk length")
            (length,) = _INT32.unpack_from(view, pos)
            pos += 4
            if length < 0 or pos + length > len(view):
                raise CompressionError("truncated xerial snappy chunk")
            block = view[pos : pos + length]
            pos += length
            total += _raw_snappy_length(block)
            _check_bound(total, max_size)
            parts.append(bytes(cramjam.snappy.decompress_raw(block)))
        return b"".join(parts)
    _check_bound(_raw_snappy_length(view), max_size)
    return bytes(cramjam.snappy.decompress_raw(view))


def _raw_snappy_length(block) -> int:
    # A raw snappy block starts with its uncompressed length as an unsigned varint.
    result = shift = 0
    for i in range(min(len(block), 5)):
        byte = block[i]
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result
        shift += 7
    raise CompressionError("bad snappy length preamble")


# --- lz4 frame --------------------------------------------------------------------

LZ4_MAGIC = 0x184D2204
_LZ4_BLOCK_SIZE = 64 * 1024
# FLG: version 01, independent blocks, no block checksum, no content size/checksum.
_LZ4_FLG = 0x60
# BD: maximum block size 64 KiB (code 4), as the Java client writes.
_LZ4_BD = 0x40
_LZ4_MAX_BLOCK = {4: 64 * 1024, 5: 256 * 1024, 6: 1024 * 1024, 7: 4 * 1024 * 1024}
_UINT32LE = struct.Struct("<I")
_UINT64LE = struct.Struct("<Q")


def _lz4_frame_compress(data, level: int | None) -> bytes:
    view = memoryview(data)
    descriptor = bytes((_LZ4_FLG, _LZ4_BD))
    out = bytearray(_UINT32LE.pack(LZ4_MAGIC))
    out += descriptor
    out.append((_xxh32(descriptor) >> 8) & 0xFF)
    compress_block = cramjam.lz4.compress_block
    for start in range(0, len(view), _LZ4_BLOCK_SIZE):
        chunk = view[start : start + _LZ4_BLOCK_SIZE]
        if level is None:
            block = compress_block(chunk, store_size=False)
        else:
            block = compress_block(
                chunk, store_size=False, mode="high_compression", compression=level
            )
        if len(block) < len(chunk):
            out += _UINT32LE.pack(len(block))
            out += block
        else:
            # Incompressible: the high bit marks a block stored as is.
            out += _UINT32LE.pack(len(chunk) | 0x80000000)
            out += chunk
    out += b"\x00\x00\x00\x00"  # end mark
    return bytes(out)


def _lz4_frames_bound(view: memoryview) -> int:
    """An upper bound of the decompressed size of concatenated LZ4 frames."""
    if not view:
        raise CompressionError("empty lz4 data")
    pos = bound = 0
    while pos < len(view):
        if pos + 7 > len(view):
            raise CompressionError("truncated lz4 frame header")
        (magic,) = _UINT32LE.unpack_from(view, pos)
        if magic & 0xFFFFFFF0 == 0x184D2A50:  # skippable frame
            (size,) = _UINT32LE.unpack_from(view, pos + 4)
            pos += 8 + size
            continue
        if magic != LZ4_MAGIC:
            raise CompressionError("bad lz4 frame magic")
        flg, bd = view[pos + 4], view[pos + 5]
        if flg >> 6 != 1:
            raise CompressionError("unsupported lz4 frame version")
        block_max = _LZ4_MAX_BLOCK.get((bd >> 4) & 0x07)
        if block_max is None:
            raise CompressionError("bad lz4 block maximum size")
        block_checksum = 4 if flg & 0x10 else 0
        pos += 6
        content_size = None
        if flg & 0x08:
            if pos + 8 > len(view):
                raise CompressionError("truncated lz4 frame header")
            (content_size,) = _UINT64LE.unpack_from(view, pos)
            pos += 8
        if flg & 0x01:
            pos += 4  # dictionary id
        pos += 1  # header checksum, verified by the decoder
        frame_bound = 0
        while True:
            if pos + 4 > len(view):
                raise CompressionError("truncated lz4 frame")
            (size,) = _UINT32LE.unpack_from(view, pos)
            pos += 4
            if size == 0:
                break
            stored = size & 0x7FFFFFFF
            frame_bound += stored if size & 0x80000000 else block_max
            pos += stored + block_checksum
        if flg & 0x04:
            pos += 4  # content checksum
        if pos > len(view):
            raise CompressionError("truncated lz4 frame")
        bound += frame_bound if content_size is None else min(frame_bound, content_size)
    return bound


def _xxh32(data: bytes, seed: int = 0) -> int:
    """XXH32, needed only for the LZ4 frame header checksum of two bytes."""
    p1, p2, p3, p4, p5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
    mask = 0xFFFFFFFF

    def rotl(x: int, r: int) -> int:
        return ((x << r) | (x >> (32 - r))) & mask

    n = len(data)
    pos = 0
    if n >= 16:
        v = [(seed + p1 + p2) & mask, (seed + p2) & mask, seed & mask, (seed - p1) & mask]
        while pos + 16 <= n:
            for i in range(4):
                lane = _UINT32LE.unpack_from(data, pos)[0]
                v[i] = (rotl((v[i] + lane * p2) & mask, 13) * p1) & mask
                pos += 4
        h = (rotl(v[0], 1) + rotl(v[1], 7) + rotl(v[2], 12) + rotl(v[3], 18)) & mask
    else:
        h = (seed + p5) & mask
    h = (h + n) & mask
    while pos + 4 <= n:
        h = (rotl((h + _UINT32LE.unpack_from(data, pos)[0] * p3) & mask, 17) * p4) & mask
        pos += 4
    while pos < n:
        h = (rotl((h + data[pos] * p5) & mask, 11) * p1) & mask
        pos += 1
    h ^= h >> 15
    h = (h * p2) & mask
    h ^= h >> 13
    h = (h * p3) & mask
    h ^= h >> 16
    return h


# --- zstd -------------------------------------------------------------------------

ZSTD_MAGIC = 0xFD2FB528
_ZSTD_BLOCK_MAX = 128 * 1024


def _zstd_frames_bound(view: memoryview) -> int:
    """An upper bound of the decompressed size of concatenated zstd frames.

    Uses Frame_Content_Size when the frame declares it; otherwise walks the block
    headers: raw and RLE blocks state their size, a compressed block inflates to at
    most 128 KiB (Block_Maximum_Size).
    """
    if not view:
        raise CompressionError("empty zstd data")
    pos = bound = 0
    while pos < len(view):
        if pos + 5 > len(view):
            raise CompressionError("truncated zstd frame header")
        (magic,) = _UINT32LE.unpack_from(view, pos)
        if magic & 0xFFFFFFF0 == 0x184D2A50:  # skippable frame
            (size,) = _UINT32LE.unpack_from(view, pos + 4)
            pos += 8 + size
            continue
        if magic != ZSTD_MAGIC:
            raise CompressionError("bad zstd frame magic")
        descriptor = view[pos + 4]
        pos += 5
        fcs_flag = descriptor >> 6
        single_segment = descriptor & 0x20
        has_checksum = descriptor & 0x04
        dict_id_size = (0, 1, 2, 4)[descriptor & 0x03]
        fcs_size = (1 if single_segment else 0, 2, 4, 8)[fcs_flag]
        if not single_segment:
            pos += 1  # window descriptor
        pos += dict_id_size
        if pos + fcs_size > len(view):
            raise CompressionError("truncated zstd frame header")
        content_size = None
        if fcs_size:
            content_size = int.from_bytes(view[pos : pos + fcs_size], "little")
            if fcs_size == 2:
                content_size += 256
        pos += fcs_size
        frame_bound = 0
        while True:
            if pos + 3 > len(view):
                raise CompressionError("truncated zstd block header")
            header = view[pos] | (view[pos + 1] << 8) | (view[pos + 2] << 16)
            pos += 3
            last = header & 1
            block_type = (header >> 1) & 3
            size = header >> 3
            if block_type == 0:  # raw
                frame_bound += size
                pos += size
            elif block_type == 1:  # RLE: one byte repeated `size` times
                frame_bound += size
                pos += 1
            elif block_type == 2:  # compressed
                frame_bound += _ZSTD_BLOCK_MAX
                pos += size
            else:
                raise CompressionError("reserved zstd block type")
            if last:
                break
        if has_checksum:
            pos += 4
        if pos > len(view):
            raise CompressionError("truncated zstd frame")
        bound += frame_bound if content_size is None else min(frame_bound, content_size)
    return bound
