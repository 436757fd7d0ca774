"""asyncio moves bytes: frames in, parts out, in request order per connection.

Requests on one connection are handled one at a time, as Kafka does (it mutes a
channel while a request is in flight), which keeps responses in order without
bookkeeping: a request whose answer is delayed (in a purgatory) holds its connection
until the operation completes. Each connection has a Session the handlers see in their
request context.

One NetworkServer per listener, each with its listener's security (broker/security/
listener.py): asyncio does a TLS listener's handshakes (bounded by a timeout) before a
connection reaches `_serve`, so a slow or stalled handshake holds no one else; the
subject of a client certificate gives the session's principal; a SASL listener's
sessions get an authenticator the dispatcher consults. File regions are sent with
sendfile on plaintext sockets (small ones are cheaper to pread); TLS must encrypt every
byte in user space, so a TLS connection reads its regions and writes them.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time

from broker.protocol.framing import FrameDecoder
from broker.protocol.types import DecodeError
from broker.records.region import FileRegion
from broker.security.listener import ListenerSecurity
from broker.security.principal import NoMatchingRule, subject_name
from broker.security.tls import HANDSHAKE_TIMEOUT_S
from broker.server.context import BrokerContext
from broker.server.dispatch import Close, NoResponse, Respond, Wait, handle_frame
from broker.server.request import Session

log = logging.getLogger(__name__)

READ_CHUNK = 256 * 1024
# Below this size a region costs less to read than a sendfile round trip.
SENDFILE_THRESHOLD = 64 * 1024


class _RegionFile:
    """The file-object face asyncio's sendfile wants over a bare fd."""

    def __init__(self, fd: int) -> None:
        self._fd = fd

    def fileno(self) -> int:
        return self._fd

    def seek(self, offset: int, whence: int = 0) -> int:
        return offset  # positions are passed explicitly; nothing to move


class NetworkServer:
    def __init__(
        self,
        ctx: BrokerContext,
        host: str,
        port: int,
        max_frame_bytes: int,
        security: ListenerSecurity | None = None,
    ) -> None:
        self.ctx = ctx
        self.host = host
        self.port = port
        self.max_frame_bytes = max_frame_bytes
        self.security = security or ListenerSecurity("PLAINTEXT", "PLAINTEXT")
        self.listener = self.security.name
        self._server: asyncio.Server | None = None
        # The task serving each open connection, with its session.
        self._connections: dict[asyncio.Task, Session] = {}

    async def start(self) -> int:
        tls = self.security.ssl
        self._server = await asyncio.start_server(
            self._serve,
            self.host,
            self.port,
            limit=READ_CHUNK,
            reuse_address=True,
            ssl=tls,
            ssl_handshake_timeout=HANDSHAKE_TIMEOUT_S if tls is not None else None,
        )
        self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    def sessions(self) -> list[Session]:
        """The sessions of the connections open now."""
        return list(self._connections.values())

    @property
    def connections(self) -> int:
        """Connections open now (a metric read at scrape time)."""
        return len(self._connections)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._connections):
            task.cancel()
        if self._connections:
            await asyncio.gather(*self._connections, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        peer = writer.get_extra_info("peername")
        host, port = (peer[0], peer[1]) if isinstance(peer, tuple) else ("", 0)
        session = Session(self.listener, host, port, self.security.protocol)
        self._connections[task] = session
        tls = writer.get_extra_info("ssl_object")
        decoder = FrameDecoder(self.max_frame_bytes)
        metrics = self.ctx.metrics
        metrics.connection_opened(self.listener)
        clock = time.perf_counter
        try:
            if tls is not None and not self._tls_principal(session, tls, peer):
                return
            session.authenticator = self.security.authenticator(session)
            while True:
                data = await reader.read(READ_CHUNK)
                if not data:
                    return
                received = clock()  # the latency phases (broker/metrics/definitions.py)
                try:
                    frames = decoder.feed(data)
                except DecodeError as exc:
                    log.warning("closing connection from %s: %s", peer, exc)
                    return
                for frame in frames:
                    started = clock()
                    outcome = handle_frame(self.ctx, session, frame)
                    handled = answered = clock()
                    if isinstance(outcome, Wait):
                        outcome = await self._wait(outcome)
                        answered = clock()
                    if isinstance(outcome, Close):
                        log.warning("closing connection from %s: %s", peer, outcome.reason)
                        return
                    if isinstance(outcome, Respond):
                        await self._send(writer, outcome.parts, copy=tls is not None)
                        if outcome.close is not None:
                            log.warning("closing connection from %s: %s", peer, outcome.close)
                            return
                    else:
                        assert isinstance(outcome, NoResponse)
                    metrics.request_done(frame, received, started, handled, answered, clock())
        except (OSError, asyncio.IncompleteReadError):
            pass  # reset, timed out (a peer gone silent): this connection only
        except asyncio.CancelledError:
            pass
        finally:
            self._connections.pop(task, None)
            authenticator = session.authenticator
            if authenticator is not None and authenticator.failed:
                metrics.authentication_failed(self.listener, authenticator.mechanism or "")
            writer.close()

    async def _wait(self, wait: Wait) -> Respond | Close:
        """The answer of a delayed operation, once an event or its deadline completes it."""
        done: asyncio.Future = asyncio.get_running_loop().create_future()
        wait.operation.add_done_callback(lambda body: done.done() or done.set_result(body))
        return wait.respond(await done)

    def _tls_principal(self, session: Session, tls, peer) -> bool:
        """The principal of a client certificate (when one was asked for and given); False
        when no mapping rule takes its subject: the connection closes."""
        cert = tls.getpeercert()
        if not cert:
            return True
        try:
            session.principal = self.security.principal_mapper.principal(
                subject_name(cert.get("subject", ()))
            )
        except NoMatchingRule as exc:
            log.warning("closing connection from %s: %s", peer, exc)
            return False
        return True

    async def _send(self, writer: asyncio.StreamWriter, parts: list, copy: bool = False) -> None:
        loop = asyncio.get_running_loop()
        pending: list[bytes] = []
        for part in parts:
            if isinstance(part, FileRegion):
                if copy or part.size < SENDFILE_THRESHOLD:
                    pending.append(os.pread(part.fd, part.size, part.position))
                    continue
                if pending:
                    writer.write(b"".join(pending))
                    pending.clear()
                await loop.sendfile(
                    writer.transport, _RegionFile(part.fd), part.position, part.size
                )
            else:
                pending.append(part)
        if pending:
            writer.write(b"".join(pending))
        await writer.drain()
