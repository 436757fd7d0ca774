"""The controller's channel to one broker: its requests in order, one at a time, retried.

As Kafka's controller channel manager keeps it: a broker's LeaderAndIsr, UpdateMetadata
and StopReplica requests are never reordered -- a later request may undo an earlier one
-- so the channel sends the head of its queue, waits for the answer, and only then sends
the next. A request whose connection fails or times out is sent again (the node's
reconnect backoff paces the attempts) until it is answered or the channel closes: the
controller closes a broker's channel when the broker leaves the cluster, and all of them
when it resigns, dropping what is queued. Resending is safe because these requests are
idempotent for the controller epoch that sent them.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable
from typing import NamedTuple

from broker.inter_broker.node import NodeClient
from broker.protocol.client_connection import api_name
from broker.protocol.errors import NetworkError, RequestTimedOutError

log = logging.getLogger(__name__)


class ChannelClosed(RuntimeError):
    """A request was enqueued on a channel that was closed."""


class _Queued(NamedTuple):
    api_key: int
    version: int
    body: dict
    on_response: Callable[[dict], object]
    on_error: Callable[[Exception], object] | None


class RequestChannel:
    """An ordered queue of requests to one broker, each answered through its callback."""

    def __init__(self, node: NodeClient, *, request_timeout_s: float = 30.0) -> None:
        self.node = node
        self.request_timeout_s = request_timeout_s
        self._queue: deque[_Queued] = deque()
        self._wake = asyncio.Event()
        self._sender: asyncio.Task | None = None
        self.closed = False
        self.retries = 0  # sends repeated after a failed connection or a timeout

    def __repr__(self) -> str:
        return f"RequestChannel(node {self.node.node_id}, {len(self._queue)} queued)"

    @property
    def pending(self) -> int:
        """Requests not answered yet (the one being sent included)."""
        return len(self._queue)

    def enqueue(
        self,
        api_key: int,
        version: int,
        body: dict,
        on_response: Callable[[dict], object],
        on_error: Callable[[Exception], object] | None = None,
    ) -> None:
        """Queue a request; `on_response(body)` runs on the event loop once it is answered
        (errors the broker answers with are in the body). A request the broker cannot
        take at all -- it does not serve that version, the body does not encode -- is
        dropped and given to `on_error` (logged when there is none); it is not retried."""
        if self.closed:
            raise ChannelClosed(
                f"channel to node {self.node.node_id} is closed; {api_name(api_key)} not sent"
            )
        self._queue.append(_Queued(api_key, version, body, on_response, on_error))
        if self._sender is None:
            self._sender = asyncio.get_running_loop().create_task(
                self._send_loop(), name=f"controller channel to node {self.node.node_id}"
            )
        self._wake.set()

    async def close(self) -> None:
        """Drop what is queued (its callbacks never run), stop sending, close the node."""
        self.closed = True
        self._queue.clear()
        sender, self._sender = self._sender, None
        self.node.close()
        if sender is not None:
            sender.cancel()
            try:
                await sender
            except asyncio.CancelledError:
                pass

    async def _send_loop(self) -> None:
        while True:
            while not self._queue:
                self._wake.clear()
                await self._wake.wait()
            item = self._queue[0]
            try:
                response = await self.node.request(
                    item.api_key, item.version, item.body, self.request_timeout_s
                )
            except (NetworkError, RequestTimedOutError) as exc:
                if self.node.closed:  # closed under us: nothing can be sent any more
                    self.closed = True
                    self._queue.clear()
                    return
                # Not answered: send it again once the node's backoff allows.
                self.retries += 1
                log.debug(
                    "node %d: %s, resending %s", self.node.node_id, exc, api_name(item.api_key)
                )
                continue
            except Exception as exc:  # noqa: BLE001 - the request itself cannot be taken
                self._queue.popleft()
                self._deliver(item.on_error, exc, item)
                continue
            self._queue.popleft()
            self._deliver(item.on_response, response, item)

    def _deliver(self, callback: Callable | None, value: object, item: _Queued) -> None:
        if callback is None:
            log.error(
                "node %d refused %s v%d: %s",
                self.node.node_id, api_name(item.api_key), item.version, value,
            )  # fmt: skip
            return
        try:
            callback(value)
        except Exception:  # a callback's bug must not stop the broker's later requests
            log.exception(
                "callback of %s v%d to node %d failed",
                api_name(item.api_key), item.version, self.node.node_id,
            )  # fmt: skip
