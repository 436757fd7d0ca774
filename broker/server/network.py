"""asyncio moves bytes: frames in, parts out, in request order per connection.

Which frame of a connection may be handled when, and in what order the answers leave, is
the connection's `Pipeline` (broker/server/pipeline.py): it reads ahead past a Produce or
Fetch parked in a purgatory, up to `queued.max.requests.per.connection`. Each connection
is an asyncio `Protocol` (`_Connection`), not a stream reader/writer pair: the bytes a
read brings are split into frames in the callback that receives them and handled there
while the pipeline accepts, with no task switch and no future per read (the streams cost a
third of the per-request CPU outside the handlers: docs/benchmarks.md, issue 23). Frames
the pipeline cannot take yet wait in the connection, which stops reading
(`pause_reading`: TCP pushes back, as when Kafka mutes a channel) until answers leave;
it stops too while the socket's send buffer is over its high-water mark (a client that
does not read its answers). The answers ready at the head are sent as soon as the
event-loop turn that readied them is over, together in one write (a follower fetch that
acknowledges several produces readies all their answers in one turn). Each connection has
a Session the handlers see in their request context.

One NetworkServer per listener, each with its listener's security (broker/security/
listener.py): asyncio does a TLS listener's handshakes (bounded by a timeout) before a
connection reaches its protocol (which then sees plaintext), so a slow or stalled
handshake holds no one else; the subject of a client certificate gives the session's
principal; a SASL listener's sessions get an authenticator the dispatcher consults. File
regions are sent with sendfile on plaintext sockets (`loop.sendfile` on the transport;
small ones are cheaper to pread); TLS must encrypt every byte in user space, so a TLS
connection reads its regions and writes them.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections import deque

from broker.protocol.framing import FrameDecoder
from broker.protocol.types import DecodeError
from broker.records.region import FileRegion
from broker.security.listener import ListenerSecurity
from broker.security.principal import NoMatchingRule, subject_name
from broker.security.tls import HANDSHAKE_TIMEOUT_S
from broker.server.context import BrokerContext
from broker.server.dispatch import Close, Respond
from broker.server.pipeline import InFlight, Pipeline
from broker.server.request import Session

log = logging.getLogger(__name__)

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
        # Requests of one connection handled ahead of their answers (broker/server/pipeline.py).
        self.depth = ctx.config["queued.max.requests.per.connection"]
        self._server: asyncio.Server | None = None
        # Each open connection, with its session.
        self._connections: dict[_Connection, Session] = {}

    async def start(self, serving: bool = True) -> int:
        """Bind the listener's socket (the port is known from now on); with `serving`
        False it does not listen yet (connections are refused) until `serve`."""
        tls = self.security.ssl
        self._server = await asyncio.get_running_loop().create_server(
            lambda: _Connection(self),
            self.host,
            self.port,
            reuse_address=True,
            ssl=tls,
            ssl_handshake_timeout=HANDSHAKE_TIMEOUT_S if tls is not None else None,
            start_serving=serving,
        )
        self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    async def serve(self) -> None:
        """Listen and accept connections (after `start(serving=False)`)."""
        await self._server.start_serving()

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
        closing = [connection.lost for connection in self._connections]
        for connection in list(self._connections):
            connection.close(abort=True)
        if closing:
            await asyncio.gather(*closing, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()

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


class _Connection(asyncio.Protocol):
    """One client connection: frames split out of what each read brings, handled while the
    pipeline accepts; the rest wait here with reading paused until answers leave."""

    def __init__(self, server: NetworkServer) -> None:
        self.server = server
        self.metrics = server.ctx.metrics
        self.decoder = FrameDecoder(server.max_frame_bytes)
        self.transport: asyncio.BaseTransport | None = None
        # Frames received and not yet handled, each with its arrival time.
        self.backlog: deque[tuple[bytes, float]] = deque()
        self.lost: asyncio.Future = asyncio.get_running_loop().create_future()
        self._taking = False  # inside _take: what it triggers must not re-enter it
        self._write_paused = False  # the send buffer is over its high-water mark
        self._closed = False

    def connection_made(self, transport) -> None:
        self.transport = transport
        server = self.server
        peer = transport.get_extra_info("peername")
        host, port = (peer[0], peer[1]) if isinstance(peer, tuple) else ("", 0)
        self.peer = peer
        self.session = session = Session(server.listener, host, port, server.security.protocol)
        server._connections[self] = session
        self.metrics.connection_opened(server.listener)
        tls = transport.get_extra_info("ssl_object")
        self.pipeline = Pipeline(server.ctx, session, server.depth)
        self.out = _Outbound(transport, self.pipeline, self.metrics, peer, tls is not None)
        self.out.on_sent = self._sent
        self.out.on_close = self.close
        self.pipeline.on_answer = self.out.schedule
        if tls is not None and not server._tls_principal(session, tls, peer):
            self.close()
            return
        session.authenticator = server.security.authenticator(session)

    def data_received(self, data: bytes) -> None:
        if self._closed or self.pipeline.stopped is not None:
            return  # nothing after a closing answer is handled
        received = time.perf_counter()  # the latency phases (broker/metrics/definitions.py)
        try:
            frames = self.decoder.feed(data)
        except DecodeError as exc:
            log.warning("closing connection from %s: %s", self.peer, exc)
            self.close()
            return
        if frames:
            self.backlog.extend((frame, received) for frame in frames)
            self._take()

    def eof_received(self) -> bool:
        return False  # the client is done: close (its answers in flight are lost, as in Kafka)

    def pause_writing(self) -> None:
        self._write_paused = True
        self._reading()

    def resume_writing(self) -> None:
        self._write_paused = False
        self._reading()

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        self.backlog.clear()
        server = self.server
        server._connections.pop(self, None)
        self.out.done = True
        self.pipeline.on_answer = _nothing  # requests still parked answer into the void
        authenticator = self.session.authenticator
        if authenticator is not None and authenticator.failed:
            self.metrics.authentication_failed(server.listener, authenticator.mechanism or "")
        if not self.lost.done():
            self.lost.set_result(None)

    def close(self, abort: bool = False) -> None:
        """Close once what is buffered has been sent; with `abort` (the broker stops), a
        peer that does not read its answers is not waited for."""
        self._closed = True
        self.backlog.clear()
        self.server._connections.pop(self, None)  # over for the broker; TLS may still say goodbye
        transport = self.transport
        if transport is not None and not transport.is_closing():
            self.out.done = True
            if abort and transport.get_write_buffer_size():
                transport.abort()
            else:
                transport.close()

    def _take(self) -> None:
        """Handle the waiting frames while the pipeline accepts them, then send what is
        ready in one write."""
        if self._taking:
            return  # a flush inside the loop below: the loop looks again itself
        self._taking = True
        pipeline, backlog, out = self.pipeline, self.backlog, self.out
        try:
            while backlog:
                if not pipeline.accepts():
                    if pipeline.stopped is not None:
                        backlog.clear()  # nothing after a closing answer is handled
                        break
                    out.flush()  # answers ready at the head make room
                    if not pipeline.accepts():
                        break  # until an answer is sent (_sent)
                    continue
                frame, received = backlog.popleft()
                if pipeline.waiting:
                    self.metrics.request_read_ahead()
                pipeline.handle(frame, received)
            out.flush()
        finally:
            self._taking = False
        self._reading()

    def _sent(self) -> None:
        """Answers left (or became ready): waiting frames may be taken now."""
        if self.backlog and not self._closed:
            self._take()

    def _reading(self) -> None:
        """Read while frames can be taken and answers can be written."""
        transport = self.transport
        if self._closed or transport is None or transport.is_closing():
            return
        if self.backlog or self._write_paused or self.pipeline.stopped is not None:
            transport.pause_reading()
        elif not transport.is_reading():
            # sendfile pauses and resumes reading around itself: it may have resumed
            # after this connection paused, so the check is made on every take.
            transport.resume_reading()


def _nothing() -> None:
    pass


class _Outbound:
    """What one connection sends: the answers at the head of its pipeline, as they become
    ready, each batch in one write (answers completed in the same loop turn -- a follower
    fetch acknowledging several produces -- share it). A large file region goes by
    sendfile, which awaits; meanwhile later answers wait their turn. `on_sent` is told
    after each flush (the pipeline may accept again), `on_close` closes the connection."""

    def __init__(self, transport, pipeline: Pipeline, metrics, peer, copy):
        self.transport = transport
        self.pipeline = pipeline
        self.metrics = metrics
        self.peer = peer
        self.copy = copy  # TLS: file regions are read and written, never sendfile'd
        self.done = False  # the connection is over: send nothing more
        self.on_sent = _nothing
        self.on_close = transport.close
        self._scheduled = False
        self._sending: asyncio.Task | None = None  # a sendfile under way

    def schedule(self) -> None:
        """An answer became ready: flush once the current loop turn is over, so every
        answer it readies goes in the same write."""
        if not self._scheduled:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self.flush)

    def flush(self) -> None:
        """Send the answers ready at the head of the pipeline, in order."""
        self._scheduled = False
        if self._sending is not None or self.done:
            return
        pending: list = []
        sent: list[InFlight] = []
        while (entry := self.pipeline.next_answered()) is not None:
            outcome = entry.outcome
            if isinstance(outcome, Close):
                self._write(pending, sent)
                self._close(outcome.reason)
                break
            if isinstance(outcome, Respond):
                rest = self._collect(outcome.parts, pending)
                if rest is not None:  # a region for sendfile: the rest goes after it
                    self._write(pending, sent)
                    self._sending = asyncio.get_running_loop().create_task(
                        self._sendfile(entry, rest)
                    )
                    break
            sent.append(entry)
            if isinstance(outcome, Respond) and outcome.close is not None:
                self._write(pending, sent)
                self._close(outcome.close)
                break
        else:
            self._write(pending, sent)
        self.on_sent()

    def _collect(self, parts: list, pending: list) -> list | None:
        """Append the bytes of `parts` to `pending` up to the first region to sendfile;
        the parts from that region on, or None when all were taken."""
        for i, part in enumerate(parts):
            if isinstance(part, FileRegion):
                if self.copy or part.size < SENDFILE_THRESHOLD:
                    pending.append(os.pread(part.fd, part.size, part.position))
                    continue
                return parts[i:]
            pending.append(part)
        return None

    def _write(self, pending: list, sent: list[InFlight]) -> None:
        if pending and not self.transport.is_closing():
            self.transport.write(b"".join(pending))
            self.metrics.answers_written()
        pending.clear()
        self._record(sent)

    def _record(self, sent: list[InFlight]) -> None:
        now = time.perf_counter()
        for e in sent:
            self.metrics.request_done(e.api, e.received, e.started, e.handled, e.answered, now)
        sent.clear()

    async def _sendfile(self, entry: InFlight, parts: list) -> None:
        loop = asyncio.get_running_loop()
        try:
            pending: list = []
            for part in parts:
                if isinstance(part, FileRegion) and not (
                    self.copy or part.size < SENDFILE_THRESHOLD
                ):
                    if pending:
                        self.transport.write(b"".join(pending))
                        pending.clear()
                    await loop.sendfile(
                        self.transport, _RegionFile(part.fd), part.position, part.size
                    )
                else:
                    self._collect([part], pending)
            self._write(pending, [entry])
        except (OSError, RuntimeError) as exc:  # the peer went away mid-transfer
            log.debug("sending to %s failed: %s", self.peer, exc)
            self._close(None)
            return
        finally:
            self._sending = None
        self.flush()

    def _close(self, reason: str | None) -> None:
        if reason is not None:
            log.warning("closing connection from %s: %s", self.peer, reason)
        self.done = True
        self.on_close()  # after what is buffered has been sent
