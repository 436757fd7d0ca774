"""The broker's own client: requests to other brokers of the cluster, on the event loop.

- `BrokerConnection` (connection.py): one asyncio connection to an endpoint, requests
  pipelined and matched to their responses by correlation id (the sans-I/O client core,
  broker/protocol/client_connection.py, shared with the client library); used through:
- `NodeClient` (node.py): one destination broker at an updatable address, connecting
  when needed with exponential backoff and jitter (`ReconnectBackoff`); the replica
  fetchers hold one per leader (Fetch, OffsetForLeaderEpoch) and a broker one to the
  controller (ControlledShutdown);
- `RequestChannel` (channel.py): the controller's ordered, retried queue of requests to
  one broker (LeaderAndIsr, UpdateMetadata, StopReplica) with response callbacks.

Frames come from `broker.protocol`; nothing here uses the blocking client library of
`broker.client`.
"""

from broker.inter_broker.channel import ChannelClosed, RequestChannel
from broker.inter_broker.connection import BrokerConnection
from broker.inter_broker.node import NodeClient, ReconnectBackoff

__all__ = [
    "BrokerConnection",
    "ChannelClosed",
    "NodeClient",
    "ReconnectBackoff",
    "RequestChannel",
]
