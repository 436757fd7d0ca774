"""A channel to one node of the cluster: its current address, a connection made when
needed, and exponential backoff with jitter between connection attempts.

A request finds the node connected, or waits out the backoff and makes one connection
attempt; a failure raises (the caller decides whether to retry, and its next request
waits out the grown backoff, so a retry loop never spins). Any lost connection -- a
refused attempt, a peer that closed, a request that timed out -- counts as a failure;
a successful connect resets the count. The address is updatable: a broker that restarts
on another port is reached there from the next request on.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass

from broker.cluster import Endpoint
from broker.inter_broker.connection import BrokerConnection
from broker.inter_broker.security import PLAINTEXT, InterBrokerSecurity
from broker.protocol.client_connection import MAX_FRAME_BYTES
from broker.protocol.errors import NetworkError, RequestTimedOutError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ReconnectBackoff:
    """How long to wait before connecting again, as Kafka's `reconnect.backoff.ms` and
    `reconnect.backoff.max.ms`: the initial wait doubles with every failure in a row up to
    the maximum, and is spread by +-`jitter` so brokers do not reconnect in lockstep."""

    initial_ms: int = 50
    max_ms: int = 1000
    jitter: float = 0.2

    def __post_init__(self) -> None:
        if self.initial_ms < 1:
            raise ValueError(f"reconnect backoff initial_ms={self.initial_ms} must be >= 1")
        if self.max_ms < self.initial_ms:
            raise ValueError(
                f"reconnect backoff max_ms={self.max_ms} is below initial_ms={self.initial_ms}"
            )
        if not 0 <= self.jitter < 1:
            raise ValueError(f"reconnect backoff jitter={self.jitter} must be in [0, 1)")

    def delay_ms(self, failures: int, rand: Callable[[], float] = random.random) -> float:
        """The wait after `failures` failed attempts in a row (0 after none)."""
        if failures <= 0:
            return 0.0
        base = min(self.max_ms, self.initial_ms << min(failures - 1, 40))
        return base * (1 - self.jitter + 2 * self.jitter * rand())


class NodeClient:
    """Requests to one node (a broker id) at an address that may change."""

    def __init__(
        self,
        node_id: int,
        endpoint: Endpoint,
        *,
        client_id: str | None,
        backoff: ReconnectBackoff | None = None,
        connect_timeout_s: float = 10.0,
        security: InterBrokerSecurity = PLAINTEXT,
        max_frame_bytes: int = MAX_FRAME_BYTES,
        rand: Callable[[], float] = random.random,
    ) -> None:
        self.node_id = node_id
        self.client_id = client_id
        self.backoff = backoff or ReconnectBackoff()
        self.connect_timeout_s = connect_timeout_s
        self.security = security  # the inter-broker listener's TLS and SASL
        self.max_frame_bytes = max_frame_bytes
        self._rand = rand
        self._endpoint = endpoint
        self._connection: BrokerConnection | None = None
        self._lock = asyncio.Lock()  # one connection attempt at a time
        self._wake = asyncio.Event()  # set when waiting out the backoff is no longer due
        self._blocked_until = 0.0  # time.monotonic() before which no attempt is made
        self.closed = False
        # What tests and logs look at: attempts made, failures in a row, the last wait.
        self.connect_attempts = 0
        self.failures = 0
        self.reconnect_delay_ms = 0.0

    def __repr__(self) -> str:
        return f"NodeClient({self.node_id}, {self._endpoint.url()})"

    @property
    def endpoint(self) -> Endpoint:
        return self._endpoint

    @property
    def connected(self) -> bool:
        return self._connection is not None and not self._connection.closed

    def update_endpoint(self, endpoint: Endpoint) -> None:
        """The node's address changed (it registered again in ZooKeeper): drop the
        connection to the old one (its requests fail with NetworkError) and connect to
        the new one at the next request, without waiting out the old backoff."""
        if endpoint == self._endpoint:
            return
        log.info("node %d moved from %s to %s", self.node_id, self._endpoint.url(), endpoint.url())
        self._endpoint = endpoint
        connection, self._connection = self._connection, None
        if connection is not None:
            connection.close(f"node {self.node_id} moved to {endpoint.url()}")
        self.failures = 0
        self._blocked_until = 0.0
        self._wake_waiters()

    async def request(self, api_key: int, version: int, body: dict, timeout_s: float) -> dict:
        """The response body, within `timeout_s` including any backoff and connecting.

        Raises NetworkError (could not connect, connection lost; also once closed),
        RequestTimedOutError (no answer in time, or still in backoff at the deadline),
        UnsupportedVersionError (the node does not serve that version) or EncodeError.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        connection = await self._connect(deadline, timeout_s)
        try:
            return await connection.request(
                api_key, version, body, max(0.0, deadline - loop.time())
            )
        finally:
            if connection.closed:
                self._lost(connection)

    def close(self) -> None:
        """Close the connection (requests in flight fail) and refuse further requests."""
        self.closed = True
        connection, self._connection = self._connection, None
        if connection is not None:
            connection.close(f"the channel to node {self.node_id} was closed")
        self._wake_waiters()

    async def _connect(self, deadline: float, timeout_s: float) -> BrokerConnection:
        try:
            async with asyncio.timeout_at(deadline):
                async with self._lock:
                    return await self._connected()
        except TimeoutError as exc:
            raise RequestTimedOutError(
                f"node {self.node_id} at {self._endpoint.url()} not reachable within "
                f"{timeout_s:g}s ({self.failures} failed connections in a row)"
            ) from exc

    async def _connected(self) -> BrokerConnection:
        while True:
            if self.closed:
                raise NetworkError(f"the channel to node {self.node_id} is closed")
            connection = self._connection
            if connection is not None and not connection.closed:
                return connection
            if connection is not None:
                self._lost(connection)  # it broke while idle
            wait = self._blocked_until - time.monotonic()
            if wait > 0:
                await self._sleep(wait)
                continue
            endpoint = self._endpoint
            connection = BrokerConnection(
                endpoint, client_id=self.client_id, security=self.security,
                max_frame_bytes=self.max_frame_bytes,
            )  # fmt: skip
            self.connect_attempts += 1
            try:
                await connection.connect(self.connect_timeout_s)
            except BaseException:
                connection.close()
                if endpoint == self._endpoint:
                    self._count_failure(connection)
                raise
            if self.closed or endpoint != self._endpoint:  # closed, or moved, meanwhile
                connection.close(f"node {self.node_id} moved or closed while connecting")
                continue
            if self.failures:
                log.info("connected to node %d at %s again", self.node_id, endpoint.url())
            self.failures = 0
            self._connection = connection
            return connection

    def _lost(self, connection: BrokerConnection) -> None:
        if connection is self._connection:
            self._connection = None
            self._count_failure(connection)

    def _count_failure(self, connection: BrokerConnection) -> None:
        self.failures += 1
        self.reconnect_delay_ms = self.backoff.delay_ms(self.failures, self._rand)
        assert connection.closed_at is not None
        self._blocked_until = connection.closed_at + self.reconnect_delay_ms / 1000
        level = logging.WARNING if self.failures == 1 else logging.DEBUG
        log.log(
            level, "node %d at %s: %s; next attempt in %.0f ms (failure %d in a row)",
            self.node_id, connection.peer, connection.close_reason, self.reconnect_delay_ms,
            self.failures,
        )  # fmt: skip

    async def _sleep(self, seconds: float) -> None:
        """Wait out the backoff, or less if the address changes or the client closes."""
        wake = self._wake
        try:
            async with asyncio.timeout(seconds):
                await wake.wait()
        except TimeoutError:
            pass

    def _wake_waiters(self) -> None:
        self._wake.set()
        self._wake = asyncio.Event()
