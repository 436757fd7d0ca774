"""One asyncio connection from this broker to another: pipelined requests, in order.

Kafka answers the requests of a connection in the order they were sent, so the requests
in flight are a queue: each response frame belongs to the oldest request still waiting,
and its correlation id must say so. A mismatch, an undecodable frame, a peer that closes
or a request that times out leaves the stream untrustworthy: the connection closes and
every request still waiting on it fails with NetworkError.

On connect (TLS first when the inter-broker listener uses it) we send ApiVersions v3 and
keep the peer's ranges; on a SASL listener we then authenticate (SaslHandshake v1 and
SaslAuthenticate, inter_broker/security.py says with what) before any other request. Brokers of one cluster run
the same code and callers pass fixed versions, so nothing is negotiated; the check costs
one round trip per connection (connections live long) and turns a peer that does not
serve an API version (a broker of another build during an upgrade) into an
UnsupportedVersionError naming the API, instead of a peer that silently closes the
connection -- which would look like a network failure and be retried forever.
"""

from __future__ import annotations

import asyncio
import logging
import struct
import time
from collections import deque
from typing import Any

from broker.cluster import Endpoint
from broker.config.listeners import SASL_PROTOCOLS, TLS_PROTOCOLS
from broker.inter_broker.security import PLAINTEXT, InterBrokerSecurity
from broker.protocol.apis import API_BY_KEY, API_VERSIONS, SASL_AUTHENTICATE, SASL_HANDSHAKE
from broker.protocol.errors import (
    ErrorCode,
    NetworkError,
    RequestTimedOutError,
    UnsupportedVersionError,
    as_error_code,
)
from broker.protocol.framing import FrameDecoder, decode_response, encode_request
from broker.protocol.types import DecodeError
from broker.security.sasl_client import SaslClient
from broker.security.scram import ScramError

log = logging.getLogger(__name__)

SOFTWARE_NAME = "kafka-hourly-broker"
SOFTWARE_VERSION = "0.1.0"
# What asks for a larger response is out of sync (a replica Fetch answers with at most
# replica.fetch.response.max.bytes plus framing); refused before any body is buffered.
MAX_FRAME_BYTES = 1 << 30
READ_CHUNK = 256 * 1024

_ERROR_CODE = struct.Struct(">h")


def api_name(api_key: int) -> str:
    api = API_BY_KEY.get(api_key)
    return api.name if api is not None else f"api_key {api_key}"


class RequestPipeline:
    """The correlation ids and in-flight requests of one connection, without I/O.

    `encode` gives the frame to write and queues the request with a token of the
    caller's (the future its answer goes to); `receive` pairs a response frame with the
    oldest queued request and decodes it. Raises NetworkError when the frame does not
    fit (nothing in flight, a correlation id out of order, undecodable bytes): the
    connection must close.
    """

    def __init__(self, peer: str, client_id: str | None) -> None:
        self.peer = peer
        self.client_id = client_id
        self._next_id = 0
        self._in_flight: deque[tuple[int, int, int, Any]] = deque()

    def __len__(self) -> int:
        return len(self._in_flight)

    def encode(self, api_key: int, version: int, body: dict, token: Any) -> bytes:
        """The request frame (size prefix included); EncodeError leaves nothing queued."""
        cid = self._next_id
        frame = encode_request(api_key, version, cid, self.client_id, body)
        self._next_id = (cid + 1) & 0x7FFFFFFF
        self._in_flight.append((cid, api_key, version, token))
        return frame

    def receive(self, frame: bytes) -> tuple[Any, dict]:
        """(token, response body) of the oldest request in flight."""
        if not self._in_flight:
            raise NetworkError(f"{self.peer} sent a response to no request")
        # Popped only once the frame fits: on an error every request stays for drain().
        cid, api_key, version, token = self._in_flight[0]
        got = int.from_bytes(frame[:4], "big", signed=True) if len(frame) >= 4 else None
        if got != cid:
            raise NetworkError(
                f"{self.peer} answered correlation id {got}, expected {cid} "
                f"({api_name(api_key)} v{version}): responses out of order"
            )
        decode_as = version
        if api_key == API_VERSIONS and frame[4:6] == _ERROR_CODE.pack(
            ErrorCode.UNSUPPORTED_VERSION
        ):
            decode_as = 0  # a refused ApiVersions version is answered with a v0 body
        try:
            _, body = decode_response(api_key, decode_as, frame)
        except DecodeError as exc:
            raise NetworkError(
                f"undecodable {api_name(api_key)} v{version} response from {self.peer}: {exc}"
            ) from exc
        self._in_flight.popleft()
        return token, body

    def drain(self) -> list[Any]:
        """The tokens of every request still in flight, which are forgotten."""
        tokens = [entry[3] for entry in self._in_flight]
        self._in_flight.clear()
        return tokens


def check_security(endpoint: Endpoint, security: InterBrokerSecurity) -> None:
    """The endpoint's security protocol must be the one this broker connects with (that of
    the inter-broker listener): TLS needs a context, SASL credentials."""
    protocol = endpoint.security_protocol
    if protocol != security.protocol:
        raise ValueError(
            f"{endpoint.url()} is {protocol} but this broker connects with {security.protocol}"
        )
    tls = protocol in TLS_PROTOCOLS
    if tls and security.ssl is None:
        raise ValueError(f"{endpoint.url()} is {protocol} and needs a TLS context")
    if not tls and security.ssl is not None:
        raise ValueError(f"{endpoint.url()} is {protocol} but a TLS context was given")
    if (protocol in SASL_PROTOCOLS) != security.sasl:
        raise ValueError(
            f"{endpoint.url()} is {protocol}: SASL credentials are "
            + ("needed" if protocol in SASL_PROTOCOLS else "not expected")
        )


class BrokerConnection:
    """An asyncio connection to one broker endpoint, for the broker's own requests.

    `await connect(timeout_s)`, then `await request(api_key, version, body, timeout_s)`
    from any number of tasks at once (pipelined); `close()` fails what is in flight.
    """

    def __init__(
        self,
        endpoint: Endpoint,
        *,
        client_id: str | None,
        security: InterBrokerSecurity = PLAINTEXT,
        max_frame_bytes: int = MAX_FRAME_BYTES,
    ) -> None:
        check_security(endpoint, security)
        self.endpoint = endpoint
        self.peer = endpoint.url()
        self.security = security
        self.max_frame_bytes = max_frame_bytes
        self.api_versions: dict[int, tuple[int, int]] = {}
        self.closed_at: float | None = None  # time.monotonic() of close, for the backoff
        self.close_reason: str | None = None
        self._pipeline = RequestPipeline(self.peer, client_id)
        self._writer: asyncio.StreamWriter | None = None
        self._reader_task: asyncio.Task | None = None

    def __repr__(self) -> str:
        state = "closed" if self.closed else "open" if self._writer else "new"
        return f"BrokerConnection({self.peer}, {state})"

    @property
    def closed(self) -> bool:
        return self.closed_at is not None

    @property
    def in_flight(self) -> int:
        return len(self._pipeline)

    async def connect(self, timeout_s: float) -> None:
        """Open the socket (TLS when an SSL context was given) and check ApiVersions.

        NetworkError when the peer cannot be reached within `timeout_s`, closes, or does
        not speak ApiVersions v3; the connection is then closed.
        """
        if self._writer is not None or self.closed:
            raise RuntimeError(f"{self!r} cannot connect twice")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        try:
            async with asyncio.timeout_at(deadline):
                reader, self._writer = await asyncio.open_connection(
                    self.endpoint.host, self.endpoint.port, ssl=self.security.ssl, limit=READ_CHUNK
                )
        except TimeoutError as exc:
            self._fail(f"no connection within {timeout_s:g}s")
            raise NetworkError(f"cannot connect to {self.peer}: timed out") from exc
        except OSError as exc:  # refused, unreachable, a failed TLS handshake
            self._fail(f"connect failed: {exc}")
            raise NetworkError(f"cannot connect to {self.peer}: {exc}") from exc
        except BaseException:
            self._fail("connect cancelled")
            raise
        self._reader_task = loop.create_task(self._read_loop(reader), name=f"read {self.peer}")
        body = {
            "client_software_name": SOFTWARE_NAME,
            "client_software_version": SOFTWARE_VERSION,
        }
        try:
            answer = await self._request(API_VERSIONS, 3, body, max(0.0, deadline - loop.time()))
        except RequestTimedOutError as exc:
            raise NetworkError(f"{self.peer} did not answer ApiVersions in time") from exc
        except BaseException:
            self._fail("connect cancelled")
            raise
        if answer["error_code"] != ErrorCode.NONE:
            code = as_error_code(answer["error_code"]).name
            self._fail(f"ApiVersions v3 refused with {code}")
            raise NetworkError(
                f"{self.peer} refused ApiVersions v3 ({code}): not a broker of this "
                "cluster's version"
            )
        self.api_versions = {
            k["api_key"]: (k["min_version"], k["max_version"]) for k in answer["api_keys"]
        }
        if self.security.sasl:
            await self._authenticate(max(0.0, deadline - loop.time()))

    async def _authenticate(self, timeout_s: float) -> None:
        """SaslHandshake v1, then SaslAuthenticate until the exchange is over; NetworkError
        (the connection closed) when the peer refuses."""
        mechanism = self.security.mechanism
        try:
            answer = await self.request(SASL_HANDSHAKE, 1, {"mechanism": mechanism}, timeout_s)
            if answer["error_code"] != ErrorCode.NONE:
                raise NetworkError(
                    f"{self.peer} refused SASL mechanism {mechanism} "
                    f"({as_error_code(answer['error_code']).name}; it offers "
                    f"{', '.join(answer['mechanisms'])})"
                )
            client = SaslClient(mechanism, self.security.username, self.security.password)
            token = client.first()
            while token is not None:
                body = {"auth_bytes": token}
                answer = await self.request(SASL_AUTHENTICATE, 1, body, timeout_s)
                if answer["error_code"] != ErrorCode.NONE:
                    raise NetworkError(
                        f"{self.peer} refused this broker's SASL {mechanism} authentication: "
                        f"{answer['error_message']}"
                    )
                token = client.respond(answer["auth_bytes"])
        except (NetworkError, ScramError, RequestTimedOutError, UnsupportedVersionError) as exc:
            self._fail(f"SASL authentication failed: {exc}")
            raise NetworkError(f"SASL authentication with {self.peer} failed: {exc}") from exc
        except BaseException:
            self._fail("connect cancelled")
            raise

    async def request(self, api_key: int, version: int, body: dict, timeout_s: float) -> dict:
        """The response body of one request. Raises UnsupportedVersionError (nothing sent,
        the connection stays) when the peer does not serve that version, EncodeError for
        a body that cannot be encoded, RequestTimedOutError when no answer came within
        `timeout_s` and NetworkError when the connection broke; both close the
        connection. Response-level errors are in the body, for the caller to read."""
        if self._writer is None and not self.closed:
            raise RuntimeError(f"{self!r}: connect() first")
        lo, hi = self.api_versions.get(api_key, (0, -1))
        if not self.closed and not lo <= version <= hi:
            offered = f"v{lo}-v{hi}" if hi >= 0 else "nothing"
            raise UnsupportedVersionError(
                f"{self.peer} does not serve {api_name(api_key)} v{version} (it offers {offered})"
            )
        return await self._request(api_key, version, body, timeout_s)

    def close(self, reason: str = "closed by this broker") -> None:
        """Close now; requests in flight fail with NetworkError naming the reason."""
        self._fail(reason)

    async def _request(self, api_key: int, version: int, body: dict, timeout_s: float) -> dict:
        if self.closed:
            raise NetworkError(f"connection to {self.peer} is closed ({self.close_reason})")
        assert self._writer is not None
        answer: asyncio.Future[dict] = asyncio.get_running_loop().create_future()
        frame = self._pipeline.encode(api_key, version, body, answer)
        # write() only buffers, so frames of concurrent callers never interleave and
        # their order on the wire is the order of the in-flight queue.
        self._writer.write(frame)
        try:
            async with asyncio.timeout(timeout_s):
                await self._writer.drain()
                return await answer
        except TimeoutError as exc:
            what = f"{api_name(api_key)} v{version}"
            self._fail(f"{what} got no answer within {timeout_s:g}s")
            raise RequestTimedOutError(
                f"{self.peer} did not answer {what} within {timeout_s:g}s"
            ) from exc
        except OSError as exc:  # drain() on a connection the peer reset
            self._fail(f"send failed: {exc}")
            raise NetworkError(f"send to {self.peer} failed: {exc}") from exc
        finally:
            if answer.done() and not answer.cancelled():
                answer.exception()  # seen: a failure raised otherwise is not reported twice

    async def _read_loop(self, reader: asyncio.StreamReader) -> None:
        decoder = FrameDecoder(self.max_frame_bytes)
        try:
            while True:
                data = await reader.read(READ_CHUNK)
                if not data:
                    self._fail("the peer closed the connection")
                    return
                for frame in decoder.feed(data):
                    answer, body = self._pipeline.receive(frame)
                    if not answer.done():  # a caller that gave up (cancelled) is gone
                        answer.set_result(body)
        except NetworkError as exc:
            self._fail(exc.detail)
        except DecodeError as exc:  # FrameTooLarge: the stream is out of sync
            self._fail(f"bad frame from {self.peer}: {exc}")
        except OSError as exc:
            self._fail(f"receive failed: {exc}")

    def _fail(self, reason: str) -> None:
        if self.closed:
            return
        self.closed_at = time.monotonic()
        self.close_reason = reason
        for answer in self._pipeline.drain():
            if not answer.done():
                answer.set_exception(NetworkError(f"connection to {self.peer} closed: {reason}"))
        if self._writer is not None:
            self._writer.close()
        task = self._reader_task
        if task is not None and task is not asyncio.current_task():
            task.cancel()
        log.debug("connection to %s closed: %s", self.peer, reason)
