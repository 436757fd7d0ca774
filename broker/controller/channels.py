"""The controller's line to each live broker: one ordered, retried request channel per
broker (broker/inter_broker/channel.py), opened when the broker joins, closed
when it dies or the controller resigns. A request to a broker without an open channel
is dropped: the broker is not live, and it gets the whole picture when it returns.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from broker.cluster import BrokerRegistration
from broker.controller.requests import endpoint_for
from broker.inter_broker import NodeClient, RequestChannel
from broker.inter_broker.security import PLAINTEXT, InterBrokerSecurity
from broker.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

OnResponse = Callable[[dict], None]


class BrokerChannels:
    def __init__(
        self,
        controller_id: int,
        listener: str,
        *,
        request_timeout_s: float,
        security: InterBrokerSecurity = PLAINTEXT,
    ) -> None:
        self.controller_id = controller_id
        self.listener = listener  # the inter-broker listener: where requests are sent
        self.security = security  # and how (its TLS and SASL)
        self.request_timeout_s = request_timeout_s
        self._channels: dict[int, RequestChannel] = {}

    def __contains__(self, broker_id: int) -> bool:
        return broker_id in self._channels

    def open(self, registration: BrokerRegistration) -> None:
        """A channel to the broker (an open one follows the broker's new address)."""
        broker_id = registration.broker_id
        endpoint = endpoint_for(registration, self.listener)
        channel = self._channels.get(broker_id)
        if channel is not None and not channel.closed:
            channel.node.update_endpoint(endpoint)
            return
        node = NodeClient(
            broker_id,
            endpoint,
            client_id=f"controller-{self.controller_id}",
            security=self.security,
        )
        self._channels[broker_id] = RequestChannel(node, request_timeout_s=self.request_timeout_s)

    async def close(self, broker_id: int) -> None:
        channel = self._channels.pop(broker_id, None)
        if channel is not None:
            await channel.close()
            channel.node.close()

    async def close_all(self) -> None:
        channels, self._channels = self._channels, {}
        for channel in channels.values():
            await channel.close()
            channel.node.close()

    def send(self, broker_id: int, api, body: dict, on_response: OnResponse | None = None) -> None:
        """Queue `body` for the broker; `on_response` (default: log its errors) gets the
        answer."""
        channel = self._channels.get(broker_id)
        if channel is None or channel.closed:
            return
        channel.enqueue(
            api.key,
            api.max_version,
            body,
            on_response or (lambda response: log_errors(api.name, broker_id, response)),
        )


def succeeded(response: dict) -> bool:
    return response.get("error_code") == ErrorCode.NONE


def log_errors(api: str, broker_id: int, response: dict) -> None:
    if response.get("error_code"):
        log.warning("%s to broker %d: error %s", api, broker_id, response["error_code"])
    for error in response.get("partition_errors") or ():
        if error["error_code"]:
            log.warning(
                "%s to broker %d: %s-%d error %s",
                api,
                broker_id,
                error["topic_name"],
                error["partition_index"],
                error["error_code"],
            )
