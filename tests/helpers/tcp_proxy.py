"""A TCP proxy on the test's event loop, to cut a client's connection at a chosen moment
(e.g. a ZooKeeper client's, while a request is in flight) without stopping the server:
`hold()` keeps the server's answers from the client, `cut()` closes every connection;
new connections go through again."""

from __future__ import annotations

import asyncio


class TcpProxy:
    def __init__(self, upstream_host: str, upstream_port: int) -> None:
        self.upstream = (upstream_host, upstream_port)
        self.port = 0
        self.holding = False
        self.sent_while_holding = bytearray()  # what clients sent while answers were held
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    async def start(self) -> TcpProxy:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def stop(self) -> None:
        self.cut()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    def hold(self) -> None:
        """From now on the server's answers do not reach the clients."""
        self.holding = True
        self.sent_while_holding.clear()

    def cut(self) -> None:
        """Close every connection (abruptly, as a dead server's end), stop holding."""
        for writer in list(self._writers):
            writer.transport.abort()
        self._writers.clear()
        self.holding = False

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        except OSError:
            writer.transport.abort()
            return
        self._writers |= {writer, up_writer}
        await asyncio.gather(
            self._pipe(reader, up_writer, upstream=True),
            self._pipe(up_reader, writer, upstream=False),
            return_exceptions=True,
        )
        for w in (writer, up_writer):
            self._writers.discard(w)
            w.transport.abort()

    async def _pipe(self, source, sink, *, upstream: bool) -> None:
        try:
            while data := await source.read(65536):
                if upstream and self.holding:
                    self.sent_while_holding += data
                if not upstream and self.holding:
                    continue  # held: lost with the connection
                sink.write(data)
                await sink.drain()
        finally:
            sink.transport.abort()
