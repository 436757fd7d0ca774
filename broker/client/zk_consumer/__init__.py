"""Kafka 0.8's ZooKeeper-based high-level consumer (README.md beside this file)."""

from broker.client.zk_consumer.consumer import ConsumerRecord, RebalanceFailedError, ZkConsumer

__all__ = ["ConsumerRecord", "RebalanceFailedError", "ZkConsumer"]
