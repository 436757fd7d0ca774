"""One asyncio connection from this broker to another: pipelined requests, in order.

Kafka answers the requests of a connection in the order they were sent; the requests in
flight and the pairing of answers are the sans-I/O `ClientConnection`
(broker/protocol/client_connection.py), which this module feeds with the bytes it reads.
A correlation id out of order, an undecodable frame, a peer that closes or a request
that times out leaves the stream untrustworthy: the connection closes and every request
still waiting on it fails with NetworkError.

On connect (TLS first when the inter-broker listener uses it) we send ApiVersions v3 and
keep the peer's ranges; on a SASL listener we then authenticate (the `SaslExchange` of
broker/security/sasl_client.py, SaslHandshake v1 and SaslAuthenticate v1;
inter_broker/security.py says with what) before any other request. Brokers of one
cluster run the same code and callers pass fixed versions, so nothing is negotiated; the
check costs one round trip per connection (connections live long) and turns a peer that
does not serve an API version (a broker of another build during an upgrade) into an
UnsupportedVersionError naming the API, instead of a peer that silently closes the
connection -- which would look like a network failure and be retried forever.
"""

from __future__ import annotations

import asyncio
import logging
import time

from broker.cluster import Endpoint
from broker.config.listeners import SASL_PROTOCOLS, TLS_PROTOCOLS
from broker.inter_broker.security import PLAINTEXT, InterBrokerSecurity
from broker.protocol.apis import API_VERSIONS
from broker.protocol.client_connection import MAX_FRAME_BYTES, ClientConnection, api_name
from broker.protocol.errors import (
    ErrorCode,
    KafkaError,
    NetworkError,
    RequestTimedOutError,
    UnsupportedVersionError,
    as_error_code,
)
from broker.security.sasl_client import SaslExchange

log = logging.getLogger(__name__)

SOFTWARE_NAME = "kafka-hourly-broker"
SOFTWARE_VERSION = "0.1.0"


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
        self._core = ClientConnection(self.peer, client_id, max_frame_bytes)
        self._transport: asyncio.Transport | None = None
        # Set while the socket's send buffer is over its high-water mark: senders wait.
        self._drained: asyncio.Future | None = None

    def __repr__(self) -> str:
        state = "closed" if self.closed else "open" if self._transport else "new"
        return f"BrokerConnection({self.peer}, {state})"

    @property
    def closed(self) -> bool:
        return self.closed_at is not None

    @property
    def in_flight(self) -> int:
        return len(self._core)

    async def connect(self, timeout_s: float) -> None:
        """Open the socket (TLS when an SSL context was given) and check ApiVersions.

        NetworkError when the peer cannot be reached within `timeout_s`, closes, or does
        not speak ApiVersions v3; the connection is then closed.
        """
        if self._transport is not None or self.closed:
            raise RuntimeError(f"{self!r} cannot connect twice")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        try:
            async with asyncio.timeout_at(deadline):
                self._transport, _ = await loop.create_connection(
                    lambda: _Reader(self), self.endpoint.host, self.endpoint.port,
                    ssl=self.security.ssl,
                )  # fmt: skip
        except TimeoutError as exc:
            self._fail(f"no connection within {timeout_s:g}s")
            raise NetworkError(f"cannot connect to {self.peer}: timed out") from exc
        except OSError as exc:  # refused, unreachable, a failed TLS handshake
            self._fail(f"connect failed: {exc}")
            raise NetworkError(f"cannot connect to {self.peer}: {exc}") from exc
        except BaseException:
            self._fail("connect cancelled")
            raise
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
        """SaslHandshake v1, then SaslAuthenticate v1 until the exchange is over;
        NetworkError (the connection closed) when the peer refuses, naming its error."""
        security = self.security
        exchange = SaslExchange(security.mechanism, security.username, security.password)
        try:
            request = exchange.start()
            while request is not None:
                api_key, body = request
                request = exchange.receive(await self.request(api_key, 1, body, timeout_s))
        except KafkaError as exc:  # the peer's refusal, a timeout, a broken connection
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
        if self._transport is None and not self.closed:
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
        assert self._transport is not None
        answer: asyncio.Future[dict] = asyncio.get_running_loop().create_future()
        _, frame = self._core.send_request(api_key, version, body, answer)
        # write() only buffers, so frames of concurrent callers never interleave and
        # their order on the wire is the order of the in-flight queue.
        self._transport.write(frame)
        try:
            async with asyncio.timeout(timeout_s):
                if self._drained is not None:
                    await asyncio.shield(self._drained)
                return await answer
        except TimeoutError as exc:
            what = f"{api_name(api_key)} v{version}"
            self._fail(f"{what} got no answer within {timeout_s:g}s")
            raise RequestTimedOutError(
                f"{self.peer} did not answer {what} within {timeout_s:g}s"
            ) from exc
        finally:
            if answer.done() and not answer.cancelled():
                answer.exception()  # seen: a failure raised otherwise is not reported twice

    def _received(self, data: bytes) -> None:
        """Bytes from the peer (`_Reader.data_received`): the answers they complete go to
        their callers, in the callback, with no reading task to wake."""
        core = self._core
        try:
            core.receive_data(data)
            while (response := core.next_response()) is not None:
                answer = response.request.token
                if not answer.done():  # a caller that gave up (cancelled) is gone
                    answer.set_result(response.body)
        except NetworkError as exc:  # the stream is out of sync (client_connection.py)
            self._fail(exc.detail)

    def _fail(self, reason: str) -> None:
        if self.closed:
            return
        self.closed_at = time.monotonic()
        self.close_reason = reason
        for answer in self._core.drain():
            if not answer.done():
                answer.set_exception(NetworkError(f"connection to {self.peer} closed: {reason}"))
        if self._transport is not None:
            self._transport.close()
        self._writable()
        log.debug("connection to %s closed: %s", self.peer, reason)

    def _writable(self) -> None:
        if self._drained is not None:
            self._drained.set_result(None)
            self._drained = None


class _Reader(asyncio.Protocol):
    """The socket's events for its BrokerConnection (an asyncio Protocol rather than a
    stream reader and a task looping on it: a response costs no task switch)."""

    def __init__(self, connection: BrokerConnection) -> None:
        self.connection = connection

    def data_received(self, data: bytes) -> None:
        self.connection._received(data)

    def eof_received(self) -> bool:
        return False  # close; connection_lost says why

    def connection_lost(self, exc: Exception | None) -> None:
        reason = "the peer closed the connection" if exc is None else f"receive failed: {exc}"
        self.connection._fail(reason)

    def pause_writing(self) -> None:
        connection = self.connection
        if connection._drained is None:
            connection._drained = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        self.connection._writable()
