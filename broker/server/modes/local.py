"""A single broker (no `zookeeper.connect`) is its own controller.

It decides what a ZooKeeper controller would (this broker leads every partition, alone in
its ISR; leader epochs carry on from the log's checkpoint) and applies the decisions the
way a cluster's broker receives them: leadership through the replica manager (as a
LeaderAndIsr would), the metadata cache through `update` (as an UpdateMetadata would).
So the handlers, the replica manager and the cache have one code path in both modes.
Topic overrides are kept in `topic-configs.json` in the first log dir, the dynamic broker
configs (AlterConfigs of this broker or of the cluster-wide `<default>`) in
`broker-configs.json` beside it.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from broker.cluster import LEADER_DURING_DELETE, BrokerRegistration, TopicError, TopicSpec
from broker.config.definition import ConfigError
from broker.protocol.errors import ErrorCode
from broker.security.credentials import Credentials
from broker.security.user_scram import scram_entries, stored_configs
from broker.server.dynamic_config import ResourceType
from broker.server.metadata import MetadataCache, PartitionState
from broker.server.modes.topic_admin import TopicAdmin
from broker.server.partition import Leadership
from broker.server.replica_manager import PartitionDecision, ReplicaManager
from broker.server.topic_config import TopicConfigs
from broker.util.files import write_atomically

log = logging.getLogger(__name__)

TOPIC_CONFIGS_FILE = "topic-configs.json"
BROKER_CONFIGS_FILE = "broker-configs.json"
# A single broker's controller epoch never changes (nobody else can take over).
LOCAL_CONTROLLER_EPOCH = 1


def read_topic_overrides(log_dir: Path) -> dict[str, dict[str, str]]:
    return _read_json(log_dir / TOPIC_CONFIGS_FILE)


def read_broker_overrides(log_dir: Path) -> dict[str, dict[str, str]]:
    """entity (`<default>` or the broker id) -> its dynamic broker configs."""
    return _read_json(log_dir / BROKER_CONFIGS_FILE)


def _read_json(path: Path) -> dict[str, dict[str, str]]:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return {}


def _write_json(path: Path, value: dict) -> None:
    write_atomically(path, json.dumps(value, indent=1, sort_keys=True).encode())


class LocalController(TopicAdmin):
    def __init__(
        self,
        broker_id: int,
        metadata: MetadataCache,
        replicas: ReplicaManager,
        topic_configs: TopicConfigs,
        log_dir: Path,
        default_partitions: int,
        default_replication_factor: int,
        credentials: Credentials | None = None,
    ) -> None:
        super().__init__(metadata, topic_configs, default_partitions, default_replication_factor)
        self.broker_id = broker_id
        self.replicas = replicas
        # The SCRAM users (sasl.scram.credentials.file; in memory only without one).
        self.credentials = credentials if credentials is not None else Credentials()
        self._configs_path = log_dir / TOPIC_CONFIGS_FILE
        self._broker_configs_path = log_dir / BROKER_CONFIGS_FILE

    def start(self, registration: BrokerRegistration) -> None:
        """This broker is live and leads every partition found on disk."""
        # No other controller may ever direct a single broker: every LeaderAndIsr,
        # UpdateMetadata or StopReplica that reaches it is from a stale epoch.
        self.replicas.controller_epoch = 2**31 - 1
        self.metadata.update(self.broker_id, LOCAL_CONTROLLER_EPOCH, [registration], [])
        by_topic: dict[str, list[int]] = {}
        for topic, index in sorted(self.replicas.partitions):
            by_topic.setdefault(topic, []).append(index)
        for topic, indexes in by_topic.items():
            self._lead(topic, indexes, is_new=False)

    def _lead(self, topic: str, indexes: list[int], is_new: bool) -> None:
        me = (self.broker_id,)
        decisions = []
        for index in indexes:
            hosted = self.replicas.get(topic, index)
            epoch = hosted.leader_epoch if hosted is not None else 0
            state = Leadership(self.broker_id, epoch, me, me, 0, LOCAL_CONTROLLER_EPOCH)
            decisions.append(PartitionDecision(topic, index, state, is_new))
        self.replicas.apply_leadership(decisions, {})
        self.metadata.update(
            self.broker_id,
            LOCAL_CONTROLLER_EPOCH,
            None,
            [
                PartitionState(
                    topic,
                    d.partition,
                    self.broker_id,
                    self.replicas.get(topic, d.partition).leader_epoch,
                    me,
                    me,
                    controller_epoch=LOCAL_CONTROLLER_EPOCH,
                )
                for d in decisions
            ],
        )

    # -- topic administration ------------------------------------------------------------
    async def create_topics(
        self, specs: list[TopicSpec], validate_only: bool
    ) -> dict[str, TopicError | None]:
        return {spec.name: self._create(spec, validate_only) for spec in specs}

    def _create(self, spec: TopicSpec, validate_only: bool) -> TopicError | None:
        try:
            assignment = self.plan(spec)
        except TopicError as exc:
            return exc
        if validate_only:
            return None
        try:
            self.topic_configs.set(spec.name, dict(spec.configs or {}))
        except ConfigError as exc:  # plan() checked them; keep the error honest anyway
            return TopicError(ErrorCode.INVALID_CONFIG, str(exc))
        self._save_overrides()
        self._lead(spec.name, sorted(assignment), is_new=True)
        return None

    async def delete_topics(self, names: list[str]) -> dict[str, TopicError | None]:
        return {name: self._delete(name) for name in names}

    def _delete(self, name: str) -> TopicError | None:
        partitions = self.metadata.topics.get(name)
        if partitions is None:
            return TopicError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                "This server does not host this topic-partition.",
            )
        self.replicas.stop_replicas([(name, p) for p in partitions], delete=True)
        self.metadata.update(
            self.broker_id,
            LOCAL_CONTROLLER_EPOCH,
            None,
            [
                PartitionState(name, p, LEADER_DURING_DELETE, state.leader_epoch, (), ())
                for p, state in partitions.items()
            ],
        )
        if self.topic_configs.overrides(name):
            self.topic_configs.remove(name)
            self._save_overrides()
        return None

    async def create_partitions(
        self, requests: list[tuple[str, int, list[list[int]] | None]], validate_only: bool
    ) -> dict[str, TopicError | None]:
        results: dict[str, TopicError | None] = {}
        for topic, count, assignment in requests:
            partitions = self.metadata.topics.get(topic)
            current = {p: list(s.replicas) for p, s in partitions.items()} if partitions else None
            try:
                added = self.plan_partitions(topic, current, count, assignment)
            except TopicError as exc:
                results[topic] = exc
                continue
            if not validate_only:
                self._lead(topic, sorted(added), is_new=True)
            results[topic] = None
        return results

    def auto_create(self, name: str) -> None:
        error = self._create(TopicSpec(name), validate_only=False)
        if error is not None and error.code != ErrorCode.TOPIC_ALREADY_EXISTS:
            log.info("not auto-creating %r: %s", name, error.message)

    async def read_config(self, resource: ResourceType, entity: str) -> dict[str, str]:
        if resource == ResourceType.TOPIC:
            return self.topic_configs.overrides(entity)
        return read_broker_overrides(self._broker_configs_path.parent).get(entity, {})

    async def write_config(self, resource: ResourceType, entity: str, overrides: dict) -> None:
        """Store a topic's overrides or a broker entity's dynamic configs (the caller
        applies them)."""
        if resource == ResourceType.TOPIC:
            self._save_overrides({**self.topic_configs.all_overrides(), entity: overrides})
            return
        stored = read_broker_overrides(self._broker_configs_path.parent)
        stored[entity] = dict(overrides)
        _write_json(self._broker_configs_path, {e: v for e, v in stored.items() if v})

    async def read_user_configs(self, users: list[str] | None) -> dict[str, dict[str, str]]:
        return stored_configs(self.credentials.users(), users)

    async def write_user_config(self, user: str, config: dict[str, str]) -> None:
        """The user's SCRAM entries into the credentials file, which the SASL listeners
        read (other keys of Kafka's user entity have no use on a single broker)."""
        self.credentials.replace(user, scram_entries(config))

    def _save_overrides(self, overrides: dict[str, dict[str, str]] | None = None) -> None:
        if overrides is None:
            overrides = self.topic_configs.all_overrides()
        _write_json(self._configs_path, {t: v for t, v in overrides.items() if v})
