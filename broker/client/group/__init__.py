"""The group consumer of our client library: Kafka's classic group protocol as a client
(README.md of broker/client, "Group consumer")."""

from broker.client.group.consumer import GroupConsumer, GroupMetadata
from broker.client.group.errors import CommitFailedError, NoOffsetForPartitionError
from broker.client.group.fetcher import ConsumerRecord
from broker.client.group.offsets import OffsetAndMetadata
from broker.client.group.subscription import RebalanceListener
from broker.cluster import TopicPartition

__all__ = [
    "CommitFailedError",
    "ConsumerRecord",
    "GroupConsumer",
    "GroupMetadata",
    "NoOffsetForPartitionError",
    "OffsetAndMetadata",
    "RebalanceListener",
    "TopicPartition",
]
