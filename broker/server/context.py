"""What a request handler may read and change: passed explicitly, never global."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from broker.config.server import BrokerConfig
from broker.server.metadata import MetadataCache
from broker.server.producer_ids import ProducerIdAllocator
from broker.server.replica_manager import ReplicaManager


@dataclass
class BrokerContext:
    config: BrokerConfig
    metadata: MetadataCache
    replicas: ReplicaManager
    producer_ids: ProducerIdAllocator
    now_ms: Callable[[], int]
