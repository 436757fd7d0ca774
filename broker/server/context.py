"""What a request handler may read and change: passed explicitly, never global."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from broker.config.server import BrokerConfig
from broker.server.metadata import MetadataCache
from broker.server.producer_ids import ProducerIdAllocator
from broker.server.purgatory import Purgatory
from broker.server.replica_manager import ReplicaManager


@dataclass
class BrokerContext:
    config: BrokerConfig
    metadata: MetadataCache
    replicas: ReplicaManager
    producer_ids: ProducerIdAllocator
    now_ms: Callable[[], int]
    # Long-poll fetches waiting for data, keyed by (topic, partition).
    fetch_purgatory: Purgatory = field(default_factory=lambda: Purgatory("Fetch"))

    def __post_init__(self) -> None:
        self.replicas.high_watermark_listeners.append(self._high_watermark_moved)

    def _high_watermark_moved(self, topic: str, partition: int) -> None:
        self.fetch_purgatory.check_and_complete((topic, partition), self.now_ms())

    def purgatories(self) -> list[Purgatory]:
        """Every purgatory, for the timer that expires their operations."""
        return [self.fetch_purgatory]
