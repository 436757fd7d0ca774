"""`GET /metrics` in the Prometheus text format, served on the broker's event loop.

A deliberately small HTTP/1.1 responder (one request per connection, `Connection:
close`): Prometheus and curl need nothing more, and serving on the loop means the
collectors read the broker's state between two loop steps, never while a handler
changes it (prometheus_client's threaded server would race with the loop).
"""

from __future__ import annotations

import asyncio
import logging

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

log = logging.getLogger(__name__)

MAX_REQUEST_HEAD = 8192
READ_TIMEOUT_S = 10.0


class MetricsServer:
    def __init__(self, registry: CollectorRegistry, host: str, port: int) -> None:
        self.registry = registry
        self.host = host
        self.port = port
        self._server: asyncio.Server | None = None

    async def start(self) -> int:
        self._server = await asyncio.start_server(
            self._serve, self.host, self.port, reuse_address=True
        )
        self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), READ_TIMEOUT_S)
            method, _, rest = head.partition(b" ")
            path = rest.split(b" ", 1)[0].split(b"?", 1)[0]
            if method not in (b"GET", b"HEAD"):
                status, ctype, body = "405 Method Not Allowed", "text/plain", b"GET only\n"
            elif path != b"/metrics":
                status, ctype, body = "404 Not Found", "text/plain", b"see /metrics\n"
            else:
                status, ctype = "200 OK", CONTENT_TYPE_LATEST
                body = generate_latest(self.registry)
            writer.write(
                f"HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
                + (body if method != b"HEAD" else b"")
            )
            await writer.drain()
        except (asyncio.LimitOverrunError, asyncio.IncompleteReadError, TimeoutError, OSError):
            pass  # a client gone or talking nonsense: this connection only
        except Exception:
            log.exception("metrics scrape failed")
        finally:
            writer.close()
