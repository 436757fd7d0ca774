"""The transaction machinery's requests to other brokers: one `NodeClient` per broker,
on the inter-broker listener, at the address the metadata cache names now.

Shared by the coordinator's markers (markers.py: WriteTxnMarkers to partition leaders)
and the partition leader's verification (verifier.py: AddPartitionsToTxn v4 to
coordinators), so a pair of brokers needs one connection for both.
"""

from __future__ import annotations

from broker.inter_broker import NodeClient
from broker.inter_broker.security import inter_broker_security


class PeerClients:
    def __init__(self, ctx, client_id: str) -> None:
        self.ctx = ctx
        self.client_id = client_id
        self._nodes: dict[int, NodeClient] = {}
        self._security = None

    async def request(
        self, broker: int, api_key: int, version: int, body: dict, timeout_s: float
    ) -> dict:
        """The response body; raises (broker/inter_broker/node.py) when none came."""
        if self._security is None:
            self._security = inter_broker_security(self.ctx.config)
        registration = self.ctx.metadata.brokers.get(broker)
        endpoint = registration.endpoint(self._security.listener) if registration else None
        if endpoint is None:
            raise ConnectionError(f"broker {broker} has no {self._security.listener} listener")
        node = self._nodes.get(broker)
        if node is None:
            node = self._nodes[broker] = NodeClient(
                broker, endpoint, client_id=self.client_id, security=self._security
            )
        else:
            node.update_endpoint(endpoint)
        return await node.request(api_key, version, body, timeout_s)

    def close(self) -> None:
        for node in self._nodes.values():
            node.close()
        self._nodes.clear()
