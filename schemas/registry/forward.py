"""A follower's writes: sent to the leader over HTTP, its answer returned as it came.

The leader answers a write with ``POSITION_HEADER``: the store offset its reader had
reached after the write. The follower waits for its own reader to pass that offset
before it answers, so the client that wrote through it reads its write there at once.
A forwarded request carries ``FORWARDED_HEADER``; an instance that gets one while it
does not lead answers 50004 instead of forwarding it again (no loops while the
leadership moves). A leader that cannot be reached or does not answer in time is
50003: the write may or may not have been made, and registering again is safe (the
same schema under the same subject gets the same id).
"""

from __future__ import annotations

import ssl

import httpx
from fastapi import Request
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool

from schemas.registry import errors

POSITION_HEADER = "X-Registry-Position"
FORWARDED_HEADER = "X-Registry-Forwarded"


class Forwarder:
    """`tls`: how an https leader is checked (the registry's trust store); the caller's
    Authorization header travels with the write, so the leader authenticates and
    authorizes the user itself, as it would a write sent to it directly."""

    def __init__(self, registry, tls: ssl.SSLContext | None = None) -> None:
        self.registry = registry
        self.timeout_s = registry.timeout_s  # kafkastore.timeout.ms
        self.tls = tls
        self._client: httpx.AsyncClient | None = None

    def _http(self) -> httpx.AsyncClient:
        # Made on first use, inside the server's event loop.
        if self._client is None:
            self._client = httpx.AsyncClient(timeout=self.timeout_s, verify=self.tls or True)
        return self._client

    async def forward(self, request: Request, leader) -> Response:
        if request.headers.get(FORWARDED_HEADER):
            raise errors.unknown_leader(
                f"a write forwarded here, but this instance does not lead ({leader} does)"
            )
        headers = {FORWARDED_HEADER: "1"}
        for name in ("content-type", "authorization"):
            if name in request.headers:
                headers[name] = request.headers[name]
        try:
            query = request.url.query
            answer = await self._http().request(
                request.method,
                leader.url + request.url.path + (f"?{query}" if query else ""),
                content=await request.body(),
                headers=headers,
            )
        except httpx.TimeoutException:
            raise errors.forwarding_failed(
                f"{leader.url} did not answer within {int(self.timeout_s * 1000)} ms"
            ) from None
        except httpx.HTTPError as exc:
            raise errors.forwarding_failed(f"{leader.url}: {exc}") from None
        position = answer.headers.get(POSITION_HEADER)
        if answer.is_success and position is not None and position.isdigit():
            try:
                await run_in_threadpool(self.registry.wait_for, int(position))
            except errors.RegistryError as exc:
                raise errors.timed_out(
                    f"the leader made the write, but this instance has not read it yet: "
                    f"{exc.message}"
                ) from None
        return Response(
            answer.content,
            status_code=answer.status_code,
            media_type=answer.headers.get("content-type"),
        )

    async def close(self) -> None:
        if self._client is not None:
            await self._client.aclose()
