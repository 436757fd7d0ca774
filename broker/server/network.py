"""asyncio moves bytes: frames in, parts out, in request order per connection.

Which frame of a connection may be handled when, and in what order the answers leave, is
the connection's `Pipeline` (broker/server/pipeline.py): it reads ahead past a Produce or
Fetch parked in a purgatory, up to `queued.max.requests.per.connection`. Here the frames
are fed to it while it accepts (otherwise the connection is not read: TCP pushes back, as
when Kafka mutes a channel), and the answers ready at its head are sent as soon as the
event-loop turn that readied them is over, together in one write (a follower fetch that
acknowledges several produces readies all their answers in one turn). Each connection has
a Session the handlers see in their request context.

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
from broker.server.dispatch import Close, Respond
from broker.server.pipeline import InFlight, Pipeline
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
        # Requests of one connection handled ahead of their answers (broker/server/pipeline.py).
        self.depth = ctx.config["queued.max.requests.per.connection"]
        self._server: asyncio.Server | None = None
        # The task serving each open connection, with its session.
        self._connections: dict[asyncio.Task, Session] = {}

    async def start(self, serving: bool = True) -> int:
        """Bind the listener's socket (the port is known from now on); with `serving`
        False it does not listen yet (connections are refused) until `serve`."""
        tls = self.security.ssl
        self._server = await asyncio.start_server(
            self._serve,
            self.host,
            self.port,
            limit=READ_CHUNK,
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
        pipeline = Pipeline(self.ctx, session, self.depth)
        out = _Outbound(writer, pipeline, metrics, peer, copy=tls is not None)
        pipeline.on_answer = out.schedule
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
                    while not pipeline.accepts() and pipeline.stopped is None:
                        out.flush()  # answers ready at the head make room
                        if not pipeline.accepts():
                            await out.progress()
                    if pipeline.stopped is not None:
                        break  # nothing after a closing answer is handled
                    if pipeline.waiting:
                        metrics.request_read_ahead()
                    pipeline.handle(frame, received)
                out.flush()
                if pipeline.stopped is not None:
                    await out.closed()  # the answers before the closing one go out first
                    return
                await writer.drain()
        except (OSError, asyncio.IncompleteReadError):
            pass  # reset, timed out (a peer gone silent): this connection only
        except asyncio.CancelledError:
            pass
        finally:
            out.done = True
            pipeline.on_answer = _nothing  # requests still parked answer into the void
            self._connections.pop(task, None)
            authenticator = session.authenticator
            if authenticator is not None and authenticator.failed:
                metrics.authentication_failed(self.listener, authenticator.mechanism or "")
            writer.close()

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


def _nothing() -> None:
    pass


class _Outbound:
    """What one connection sends: the answers at the head of its pipeline, as they become
    ready, each batch in one write (answers completed in the same loop turn -- a follower
    fetch acknowledging several produces -- share it). A large file region goes by
    sendfile, which awaits; meanwhile later answers wait their turn."""

    def __init__(self, writer: asyncio.StreamWriter, pipeline: Pipeline, metrics, peer, copy):
        self.writer = writer
        self.transport = writer.transport
        self.pipeline = pipeline
        self.metrics = metrics
        self.peer = peer
        self.copy = copy  # TLS: file regions are read and written, never sendfile'd
        self.done = False  # the connection is over: send nothing more
        self._scheduled = False
        self._sending: asyncio.Task | None = None  # a sendfile under way
        self._waiter: asyncio.Future | None = None

    def schedule(self) -> None:
        """An answer became ready: flush once the current loop turn is over, so every
        answer it readies goes in the same write."""
        if not self._scheduled:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self.flush)

    async def progress(self) -> None:
        """Until an answer is sent or becomes ready (the pipeline may accept again)."""
        self._waiter = asyncio.get_running_loop().create_future()
        try:
            await self._waiter
        finally:
            self._waiter = None

    async def closed(self) -> None:
        """Until the answer that closes the connection has been sent."""
        while not self.done:
            self.flush()
            if not self.done:
                await self.progress()

    def flush(self) -> None:
        """Send the answers ready at the head of the pipeline, in order."""
        self._scheduled = False
        if self._sending is not None or self.done:
            self._wake()
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
        self._wake()

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
        self.writer.close()

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)
