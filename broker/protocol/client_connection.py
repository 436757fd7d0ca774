"""The client's side of one connection, without I/O: request frames out, response bytes
in, each answer paired with its request.

    conn = ClientConnection("host:9092", client_id="me")
    correlation_id, frame = conn.send_request(METADATA, 8, body, token)   # write frame
    conn.receive_data(chunk)                                              # bytes read
    while (response := conn.next_response()) is not None:
        response.request.token, response.body

Kafka answers the requests of a connection in the order they were sent, so the requests
in flight are a queue: each response frame belongs to the oldest request still waiting,
and its correlation id must say so. `token` is the caller's own handle of a request (a
future, the body to send again); it comes back with the answer.

Responses come one at a time (`next_response`), as h11 hands out events: a frame that
does not fit (a correlation id out of order, undecodable bytes, a size out of bounds)
raises NetworkError when it is reached, after the good answers before it were handed
out. The stream cannot be trusted after that: the caller closes the connection and
fails what `drain()` gives back. Nothing is popped for a frame that did not fit.

A caller that splits frames itself hands each to `receive_frame` (the blocking client
reads exact lengths into reused buffers, so a large Fetch answer is not copied again).

Used by both clients: the blocking library's (broker/client/connection.py) and the
broker's own asyncio client for other brokers (inter_broker/connection.py).
"""

from __future__ import annotations

import struct
from collections import deque
from typing import Any, NamedTuple

from .apis import API_BY_KEY, API_VERSIONS
from .errors import ErrorCode, NetworkError
from .framing import FrameDecoder, FrameTooLarge, decode_response, encode_request
from .types import DecodeError

# A larger frame means the stream is out of sync (the largest answer asked for, a Fetch,
# is bounded by its max_bytes); refused before any of its body is buffered.
MAX_FRAME_BYTES = 1 << 30

_CORRELATION_ID_AND_ERROR = struct.Struct(">ih")


def api_name(api_key: int) -> str:
    api = API_BY_KEY.get(api_key)
    return api.name if api is not None else f"api_key {api_key}"


class InFlight(NamedTuple):
    """A request sent and waiting for its answer."""

    correlation_id: int
    api_key: int
    version: int
    token: Any


class Response(NamedTuple):
    request: InFlight
    body: dict


class ClientConnection:
    """Correlation ids, the requests in flight and the frames of one connection."""

    def __init__(
        self, peer: str, client_id: str | None, max_frame_bytes: int = MAX_FRAME_BYTES
    ) -> None:
        self.peer = peer  # for messages: "host:port" or a listener URL
        self.client_id = client_id
        self._next_id = 0
        self._in_flight: deque[InFlight] = deque()
        self._decoder = FrameDecoder(max_frame_bytes)
        self._frames: deque[bytes] = deque()
        self._broken: NetworkError | None = None

    def __len__(self) -> int:
        return len(self._in_flight)

    @property
    def next_correlation_id(self) -> int:
        """The id `send_request` gives the next request."""
        return self._next_id

    @property
    def in_flight(self) -> tuple[InFlight, ...]:
        """The requests waiting for an answer, oldest first."""
        return tuple(self._in_flight)

    def send_request(
        self,
        api_key: int,
        version: int,
        body: dict,
        token: Any = None,
        expect_response: bool = True,
    ) -> tuple[int, bytes]:
        """(correlation id, the frame to write, size prefix included).

        With expect_response=False (Produce with acks=0) the broker sends nothing back,
        so nothing waits for it. EncodeError leaves nothing queued and no id used.
        """
        cid = self._next_id
        frame = encode_request(api_key, version, cid, self.client_id, body)
        self._next_id = (cid + 1) & 0x7FFFFFFF
        if expect_response:
            self._in_flight.append(InFlight(cid, api_key, version, token))
        return cid, frame

    def receive_data(self, data: bytes | bytearray | memoryview) -> None:
        """Bytes read from the connection; their answers come from `next_response`."""
        if self._broken is not None:
            return  # next_response raises it, once the frames before it are out
        try:
            frames = self._decoder.feed(data)
            if frames:
                self._frames.extend(frames)
                # The decoder hands out the frames before a bad size and raises at its
                # next feed: now, rather than once the peer sends more.
                self._decoder.feed(b"")
        except FrameTooLarge as exc:
            self._broken = NetworkError(f"bad frame from {self.peer}: {exc}")

    def next_response(self) -> Response | None:
        """The answer to the oldest request in flight, None until its frame is complete."""
        if self._frames:
            response = self.receive_frame(self._frames[0])
            self._frames.popleft()
            return response
        if self._broken is not None:
            raise self._broken
        return None

    def receive_frame(self, frame: bytes | bytearray | memoryview) -> Response:
        """The answer in one complete response frame (without its size prefix)."""
        if not self._in_flight:
            raise NetworkError(f"{self.peer} sent a response to no request")
        request = self._in_flight[0]
        got = int.from_bytes(frame[:4], "big", signed=True) if len(frame) >= 4 else None
        if got != request.correlation_id:
            raise NetworkError(
                f"{self.peer} answered correlation id {got}, expected "
                f"{request.correlation_id} ({api_name(request.api_key)} v{request.version}): "
                "responses out of order"
            )
        body = self._decode(request, frame)
        self._in_flight.popleft()
        return Response(request, body)

    def drain(self) -> list[Any]:
        """The tokens of every request still in flight, which are forgotten: the caller
        closes the connection and fails them."""
        tokens = [request.token for request in self._in_flight]
        self._in_flight.clear()
        self._frames.clear()
        return tokens

    def _decode(self, request: InFlight, frame: bytes | bytearray | memoryview) -> dict:
        api_key, version = request.api_key, request.version
        error = None
        if api_key == API_VERSIONS and len(frame) >= _CORRELATION_ID_AND_ERROR.size:
            # An ApiVersions error code comes right after the correlation id in every
            # version. Kafka refuses a version in a v0 body (which lists the range it
            # speaks); others send what they like there (librdkafka's mock cluster a body
            # of no version), so an error answer that does not decode keeps its code.
            _, error = _CORRELATION_ID_AND_ERROR.unpack_from(frame)
            if error == ErrorCode.UNSUPPORTED_VERSION:
                version = 0
        try:
            return decode_response(api_key, version, frame)[1]
        except DecodeError as exc:
            if error:
                return {"error_code": error, "api_keys": []}
            raise NetworkError(
                f"undecodable {api_name(api_key)} v{request.version} response "
                f"from {self.peer}: {exc}"
            ) from exc
