"""Size-prefixed frames and the request/response headers around a body.

Every Kafka message on a connection is an int32 size followed by that many
bytes. A request frame is a request header then the body; a response frame is a
response header then the body. Header versions follow the API's flexibility:

- request header v1 (api_key, api_version, correlation_id, client_id) for
  non-flexible versions, v2 (the same plus tagged fields) for flexible ones;
  v0 (no client_id) is only used by ControlledShutdown v0, which we do not speak.
- response header v0 (correlation_id) for non-flexible versions, v1 (plus tagged
  fields) for flexible ones, except ApiVersions whose response header is always
  v0 so a client can parse it before it knows which versions the broker has.
"""

from __future__ import annotations

import functools
import struct
from typing import Any, NamedTuple

from .apis import API_BY_KEY, API_VERSIONS
from .codec import body_codec
from .errors import ErrorCode
from .types import DecodeError, EncodeError, Reader, Writer


class FrameTooLarge(DecodeError):
    """A frame declares a negative size or one above the decoder's limit."""


class UnsupportedRequest(DecodeError):
    """A well-formed header for an API key or version we do not declare.

    Carries the header so the broker can still answer with its correlation id.
    """

    def __init__(self, message: str, header: RequestHeader):
        super().__init__(message)
        self.header = header


class RequestHeader(NamedTuple):
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


def request_header_version(api_key: int, api_version: int) -> int:
    api = API_BY_KEY.get(api_key)
    if api is None or not api.supports(api_version):
        # Unknown to us: v1 still yields the correlation id (and client id) that
        # an error response needs; the fields v2 adds come after them.
        return 1
    return 2 if api.is_flexible(api_version) else 1


def response_header_version(api_key: int, api_version: int) -> int:
    if api_key == API_VERSIONS:
        return 0
    api = API_BY_KEY.get(api_key)
    return 1 if api is not None and api.is_flexible(api_version) else 0


def _read_request_header(r: Reader, header_version: int) -> RequestHeader:
    api_key = r.int16()
    api_version = r.int16()
    correlation_id = r.int32()
    client_id = None
    if header_version >= 1:
        # client_id keeps its int16 length even in the flexible header v2.
        n = r.int16()
        if n < -1:
            raise DecodeError(f"negative client_id length {n}")
        client_id = None if n == -1 else r.text(n)
    if header_version >= 2:
        r.skip_tagged_fields()
    return RequestHeader(api_key, api_version, correlation_id, client_id)


def decode_request_header(
    frame: bytes | bytearray | memoryview, header_version: int | None = None
) -> tuple[RequestHeader, int]:
    """The header of a request frame (without size prefix) and where its body starts.

    The header version follows the API and version in the frame unless given.
    """
    if header_version is None and len(frame) >= 10:
        fast = _fast_header(frame)
        if fast is not None:
            return fast
    r = Reader(frame)
    if header_version is None:
        if r.remaining() < 4:
            raise DecodeError("request frame shorter than api_key + api_version")
        header_version = request_header_version(r.int16(), r.int16())
        r.pos = 0
    header = _read_request_header(r, header_version)
    return header, r.pos


_HEADER_START = struct.Struct(">hhih")  # api_key, api_version, correlation_id, len(client_id)


def _fast_header(frame: bytes | bytearray | memoryview) -> tuple[RequestHeader, int] | None:
    """The common header (v1/v2, a client id, no tagged fields) in one unpack; None
    for anything else, which `_read_request_header` reads (and refuses) instead."""
    api_key, api_version, correlation_id, n = _HEADER_START.unpack_from(frame, 0)
    header_version = _header_version(api_key, api_version)
    pos = 10 + max(n, 0)
    if n < -1 or pos > len(frame):
        return None
    try:
        client_id = None if n == -1 else str(frame[10:pos], "utf-8")
    except UnicodeDecodeError:
        return None
    if header_version >= 2:
        if pos >= len(frame) or frame[pos] != 0:
            return None
        pos += 1
    return RequestHeader(api_key, api_version, correlation_id, client_id), pos


@functools.cache
def _header_version(api_key: int, api_version: int) -> int:
    return request_header_version(api_key, api_version)


def decode_request(frame: bytes | bytearray | memoryview) -> tuple[RequestHeader, dict]:
    """Header and body of a request frame (without size prefix).

    Raises UnsupportedRequest (a DecodeError carrying the header) for an API key
    or version that is not declared, DecodeError for malformed bytes.
    """
    header, offset = decode_request_header(frame)
    return header, decode_request_body(frame, header, offset)


def decode_request_body(
    frame: bytes | bytearray | memoryview, header: RequestHeader, offset: int
) -> dict:
    """The body of a request frame whose header `decode_request_header` already read
    (the body starts at `offset`): the broker reads each header once per request.

    Raises UnsupportedRequest or DecodeError as `decode_request` does.
    """
    api = API_BY_KEY.get(header.api_key)
    if api is None or not api.supports(header.api_version):
        raise UnsupportedRequest(
            f"unsupported request: api_key {header.api_key} v{header.api_version}", header
        )
    return body_codec(header.api_key, header.api_version, False).decode(Reader(frame, offset))


def encode_request(
    api_key: int, version: int, correlation_id: int, client_id: str | None, body: dict
) -> bytes:
    """A complete request frame, size prefix included."""
    api = API_BY_KEY.get(api_key)
    if api is None or not api.supports(version):
        raise EncodeError(f"cannot encode api_key {api_key} v{version}")
    w = Writer(size_prefix=True)
    header_version = request_header_version(api_key, version)
    w.int16(api_key)
    w.int16(version)
    w.int32(correlation_id)
    if client_id is None:
        w.int16(-1)
    else:
        data = client_id.encode("utf-8")
        w.int16(len(data))
        w.buf += data
    if header_version >= 2:
        w.uvarint(0)
    body_codec(api_key, version, False).encode(w, body)
    return w.getvalue()


def encode_response(api_key: int, version: int, correlation_id: int, body: dict) -> list[Any]:
    """A complete response frame as parts, size prefix included.

    Consecutive bytes are joined; non-bytes record parts (FileRegion) stay items
    of their own, and the size prefix counts them by len().
    """
    api = API_BY_KEY.get(api_key)
    if api is None or not api.supports(version):
        raise EncodeError(f"cannot encode api_key {api_key} v{version}")
    w = Writer(size_prefix=True)
    w.int32(correlation_id)
    if response_header_version(api_key, version) >= 1:
        w.uvarint(0)
    body_codec(api_key, version, True).encode(w, body)
    return w.getparts()


def decode_response(
    api_key: int, version: int, frame: bytes | bytearray | memoryview
) -> tuple[int, dict]:
    """(correlation_id, body) of a response frame without size prefix."""
    r = Reader(frame)
    correlation_id = r.int32()
    if response_header_version(api_key, version) >= 1:
        r.skip_tagged_fields()
    return correlation_id, body_codec(api_key, version, True).decode(r)


def encode_api_versions_error(
    correlation_id: int, supported: dict[int, tuple[int, int]]
) -> list[bytes]:
    """The answer to an ApiVersions request at a version we do not speak.

    Kafka answers with a v0 body (readable by any client) carrying
    UNSUPPORTED_VERSION and the supported ranges, so the client retries lower.
    The same frame is `encode_response(API_VERSIONS, 0, ...)` with that body.
    """
    body = {
        "error_code": ErrorCode.UNSUPPORTED_VERSION,
        "api_keys": [
            {"api_key": key, "min_version": lo, "max_version": hi}
            for key, (lo, hi) in sorted(supported.items())
        ],
    }
    return encode_response(API_VERSIONS, 0, correlation_id, body)


class FrameDecoder:
    """Splits a byte stream into frames (sans-I/O).

    feed() returns the frames completed by the new data, without their size
    prefix. At most one incomplete frame is buffered, and its declared size is
    checked against max_frame_bytes before any of its body is kept. A bad size
    raises FrameTooLarge (after the complete frames before it were returned, on
    the next call); the stream is then out of sync and every later feed raises.
    """

    def __init__(self, max_frame_bytes: int):
        self.max_frame_bytes = max_frame_bytes
        self._buf = bytearray()
        self._error: FrameTooLarge | None = None

    @property
    def buffered(self) -> int:
        """Bytes held for the incomplete frame."""
        return len(self._buf)

    def feed(self, data: bytes | bytearray | memoryview) -> list[bytes]:
        if self._error is not None:
            raise self._error  # the stream is out of sync; the connection must close
        if self._buf:
            self._buf += data
            src: bytes | bytearray | memoryview = self._buf
        else:
            src = data
        view = memoryview(src).cast("B")
        frames: list[bytes] = []
        pos = 0
        end = len(view)
        try:
            while end - pos >= 4:
                size = int.from_bytes(view[pos : pos + 4], "big", signed=True)
                if size < 0 or size > self.max_frame_bytes:
                    self._error = FrameTooLarge(
                        f"frame size {size} outside 0..{self.max_frame_bytes}"
                    )
                    if not frames:
                        raise self._error
                    # Hand out the good frames before it; the next feed raises.
                    pos = end
                    break
                if end - pos - 4 < size:
                    break
                frames.append(bytes(view[pos + 4 : pos + 4 + size]))
                pos += 4 + size
            # Keep only the incomplete tail; a large frame arriving in small
            # pieces is appended to in place, not re-copied on every feed.
            rest = None if (pos == 0 and src is self._buf) else bytearray(view[pos:])
        finally:
            view.release()
        if rest is not None:
            self._buf = rest
        return frames
