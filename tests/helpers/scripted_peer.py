"""An in-process asyncio peer speaking Kafka's framing, answering as a test scripts it.

For what a real broker never does: close in the middle of a response, answer out of
order, stall, refuse ApiVersions v3, send a frame of absurd size. Each accepted
connection runs `script(conn)`; `conn.next_request()` answers ApiVersions by itself
(with `api_versions`, every declared API's range by default) and returns the next other
request; the script answers, or misbehaves, through `conn`.
"""

from __future__ import annotations

import asyncio
import ssl as ssl_module
from collections.abc import Awaitable, Callable

from broker.cluster import Endpoint
from broker.protocol.apis import API_BY_KEY, API_VERSIONS
from broker.protocol.framing import FrameDecoder, RequestHeader, decode_request, encode_response

ALL_DECLARED = {key: (api.min_version, api.max_version) for key, api in API_BY_KEY.items()}


class PeerConnection:
    def __init__(self, peer: ScriptedPeer, reader, writer) -> None:
        self.peer = peer
        self.reader = reader
        self.writer = writer
        self._decoder = FrameDecoder(1 << 20)
        self._frames: list[bytes] = []

    @property
    def buffered_frames(self) -> int:
        """Request frames read from the socket but not handed to the script yet."""
        return len(self._frames)

    async def read_available(self, wait_s: float) -> None:
        """Take in whatever arrives within `wait_s` (to see whether a client pipelined)."""
        try:
            async with asyncio.timeout(wait_s):
                await self._read_more()
        except TimeoutError:
            pass

    async def _read_more(self) -> None:
        data = await self.reader.read(65536)
        if not data:
            raise ConnectionResetError("the client closed the connection")
        self._frames.extend(self._decoder.feed(data))

    async def next_request(self) -> tuple[RequestHeader, dict]:
        while True:
            while not self._frames:
                await self._read_more()
            header, body = decode_request(self._frames.pop(0))
            if header.api_key == API_VERSIONS and self.peer.api_versions is not None:
                self.answer(header, {"api_keys": [
                    {"api_key": k, "min_version": lo, "max_version": hi}
                    for k, (lo, hi) in self.peer.api_versions.items()
                ]})  # fmt: skip
                continue
            self.peer.requests.append((header, body))
            return header, body

    def response(self, header: RequestHeader, body: dict) -> bytes:
        return b"".join(
            encode_response(header.api_key, header.api_version, header.correlation_id, body)
        )

    def answer(self, header: RequestHeader, body: dict) -> None:
        self.writer.write(self.response(header, body))

    def write(self, data: bytes) -> None:
        self.writer.write(data)

    async def close(self) -> None:
        self.writer.close()
        try:
            await self.writer.wait_closed()
        except OSError:
            pass


Script = Callable[[PeerConnection], Awaitable[None]]


class ScriptedPeer:
    def __init__(
        self,
        script: Script,
        *,
        api_versions: dict[int, tuple[int, int]] | None = ALL_DECLARED,
        ssl: ssl_module.SSLContext | None = None,
    ) -> None:
        self.script = script
        self.api_versions = api_versions  # None: the script sees ApiVersions itself
        self.ssl = ssl
        self.port = 0
        self.connections = 0  # accepted so far
        self.requests: list[tuple[RequestHeader, dict]] = []  # all but ApiVersions
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task] = set()

    @property
    def endpoint(self) -> Endpoint:
        protocol = "PLAINTEXT" if self.ssl is None else "SSL"
        return Endpoint(protocol, "127.0.0.1", self.port, protocol)

    async def start(self, port: int = 0) -> ScriptedPeer:
        self._server = await asyncio.start_server(
            self._serve, "127.0.0.1", port, ssl=self.ssl, reuse_address=True
        )
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def stop(self) -> None:
        """Stop listening and drop every connection."""
        if self._server is not None:
            self._server.close()
            self._server = None
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _serve(self, reader, writer) -> None:
        self._tasks.add(asyncio.current_task())
        self.connections += 1
        conn = PeerConnection(self, reader, writer)
        try:
            await self.script(conn)
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            self._tasks.discard(asyncio.current_task())
            writer.close()

    async def __aenter__(self) -> ScriptedPeer:
        return await self.start()

    async def __aexit__(self, *exc) -> None:
        await self.stop()


async def answer_each(conn: PeerConnection, body_for: Callable[[RequestHeader, dict], dict]):
    """A well-behaved peer: every request answered at once with `body_for(header, body)`."""
    while True:
        header, body = await conn.next_request()
        conn.answer(header, body_for(header, body))
