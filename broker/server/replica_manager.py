"""The partitions hosted here, and the topic lifecycle around them (create, delete,
auto-create, per-topic overrides)."""

from __future__ import annotations

import json
from collections.abc import Callable

from broker.config.definition import ConfigError
from broker.log.manager import LogManager
from broker.protocol.errors import ErrorCode
from broker.protocol.topic import topic_name_problem
from broker.server.metadata import MetadataCache, PartitionState
from broker.server.partition import Partition
from broker.server.topic_config import apply_overrides
from broker.util.files import write_atomically

TOPIC_CONFIGS_FILE = "topic-configs.json"


class TopicError(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def check_topic_name(name: str) -> None:
    problem = topic_name_problem(name)
    if problem is not None:
        raise TopicError(
            ErrorCode.INVALID_TOPIC_EXCEPTION, f"Topic name {name!r} is illegal: {problem}"
        )


class ReplicaManager:
    """Owns the Partition objects; the MetadataCache is told of every change."""

    def __init__(
        self,
        broker_id: int,
        logs: LogManager,
        metadata: MetadataCache,
        now_ms: Callable[[], int],
        retain_batches: int = 5,
    ) -> None:
        self.broker_id = broker_id
        self.logs = logs
        self.metadata = metadata
        self.now_ms = now_ms
        self.retain_batches = retain_batches
        self.partitions: dict[tuple[str, int], Partition] = {}
        self.high_watermark_listeners: list[Callable[[str, int], None]] = []
        self._configs_path = logs.log_dirs[0] / TOPIC_CONFIGS_FILE
        self.topic_overrides: dict[str, dict[str, str]] = self._read_overrides()

    # -- start-up -------------------------------------------------------------------
    def load(self) -> None:
        """Open (and recover) the logs on disk and host every partition found, with the
        checkpointed high watermarks and each topic's overrides."""
        self.logs.load(
            {
                topic: apply_overrides(self.logs.default_config, overrides)
                for topic, overrides in self.topic_overrides.items()
            }
        )
        hws = self.logs.high_watermarks()
        for log in self.logs.logs():
            self._host(
                Partition(
                    log,
                    self.broker_id,
                    high_watermark=hws.get((log.topic, log.partition)),
                    retain_batches=self.retain_batches,
                )
            )

    def _host(self, partition: Partition) -> None:
        partition.on_high_watermark = self._high_watermark_moved
        self.partitions[(partition.topic, partition.index)] = partition
        self.metadata.set_partition(
            PartitionState(
                partition.topic,
                partition.index,
                self.broker_id,
                partition.leader_epoch,
                (self.broker_id,),
                partition.isr,
            )
        )

    def _high_watermark_moved(self, topic: str, partition: int) -> None:
        for listener in self.high_watermark_listeners:
            listener(topic, partition)

    # -- topics ---------------------------------------------------------------------
    def create_topic(
        self,
        name: str,
        num_partitions: int,
        replication_factor: int,
        configs: dict[str, str] | None = None,
        validate_only: bool = False,
    ) -> None:
        check_topic_name(name)
        if name in self.metadata.topics:
            raise TopicError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        if num_partitions <= 0:
            raise TopicError(
                ErrorCode.INVALID_PARTITIONS, "Number of partitions must be larger than 0."
            )
        live = len(self.metadata.brokers) or 1
        if replication_factor <= 0 or replication_factor > live:
            raise TopicError(
                ErrorCode.INVALID_REPLICATION_FACTOR,
                f"Replication factor: {replication_factor} larger than available brokers: {live}.",
            )
        overrides = dict(configs or {})
        try:
            log_config = apply_overrides(self.logs.default_config, overrides)
        except ConfigError as exc:
            raise TopicError(ErrorCode.INVALID_CONFIG, str(exc)) from None
        if validate_only:
            return
        if overrides:
            self.topic_overrides[name] = overrides
            self._write_overrides()
        for index in range(num_partitions):
            log = self.logs.create(name, index, log_config)
            self._host(Partition(log, self.broker_id, retain_batches=self.retain_batches))

    def delete_topic(self, name: str) -> None:
        if name not in self.metadata.topics:
            raise TopicError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                "This server does not host this topic-partition.",
            )
        for key in [k for k in self.partitions if k[0] == name]:
            del self.partitions[key]
        self.metadata.remove_topic(name)
        self.logs.delete_topic(name)
        if self.topic_overrides.pop(name, None) is not None:
            self._write_overrides()

    def _read_overrides(self) -> dict[str, dict[str, str]]:
        try:
            return json.loads(self._configs_path.read_text())
        except FileNotFoundError:
            return {}

    def _write_overrides(self) -> None:
        write_atomically(
            self._configs_path, json.dumps(self.topic_overrides, indent=1, sort_keys=True)
        )

    # -- reads ----------------------------------------------------------------------
    def get(self, topic: str, partition: int) -> Partition | None:
        return self.partitions.get((topic, partition))

    def high_watermarks(self) -> dict[tuple[str, int], int]:
        return {key: p.high_watermark for key, p in self.partitions.items()}
