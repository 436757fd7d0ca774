"""Topic administration in a cluster: requests become ZooKeeper writes the controller acts
on, as Kafka's AdminZkClient does (docs/contracts/cluster.md).

Creating a topic writes its config (`/config/topics/<t>`) and then its replica
assignment (`/brokers/topics/<t>`): the controller sees the new topic, elects leaders and
tells every broker. Deleting one writes `/admin/delete_topics/<t>`. Any broker can do
either; the requests complete when the metadata cache shows the controller's decision.
Changing a config (AlterConfigs) writes the entity's znode (`/config/topics/<t>`,
`/config/brokers/<id>` or `/config/brokers/<default>`) and then a change notification
`/config/changes/config_change_<seq>`, which every broker follows (config_changes.py).
SCRAM credentials (AlterUserScramCredentials, or the configs tool's --zookeeper) are the
config entity `/config/users/<user>`, written and announced the same way
(broker/zk/config_entities.py).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Coroutine

from broker.cluster import TopicError, TopicSpec
from broker.protocol.errors import ErrorCode
from broker.server.dynamic_config import ResourceType
from broker.server.metadata import MetadataCache
from broker.server.modes.topic_admin import TopicAdmin
from broker.server.topic_config import TopicConfigs
from broker.zk import layout as z
from broker.zk.client import BadVersionError, NodeExistsError, NoNodeError, ZkClient
from broker.zk.config_entities import read_user_configs, user_entity, write_entity_config

log = logging.getLogger(__name__)


class ZkTopicAdmin(TopicAdmin):
    def __init__(
        self,
        zk: ZkClient,
        metadata: MetadataCache,
        topic_configs: TopicConfigs,
        default_partitions: int,
        default_replication_factor: int,
        spawn: Callable[[Coroutine], object],
    ) -> None:
        super().__init__(metadata, topic_configs, default_partitions, default_replication_factor)
        self.zk = zk
        self.spawn = spawn
        self._auto_creating: set[str] = set()

    async def live_brokers(self) -> dict[int, str | None]:
        """The registered brokers and their racks, read from ZooKeeper (the metadata cache
        of a broker that just started may not know them yet)."""
        brokers: dict[int, str | None] = {}
        for child in await self.zk.get_children(z.BROKER_IDS) or []:
            found = await self.zk.get(z.broker_path(int(child))) if child.isdigit() else None
            if found is not None:
                brokers[int(child)] = z.decode_broker(int(child), found[0]).rack
        return brokers

    async def create_topics(
        self, specs: list[TopicSpec], validate_only: bool
    ) -> dict[str, TopicError | None]:
        brokers = await self.live_brokers()
        return {spec.name: await self._create(spec, brokers, validate_only) for spec in specs}

    async def _create(
        self, spec: TopicSpec, brokers: dict[int, str | None], validate_only: bool
    ) -> TopicError | None:
        try:
            assignment = self.plan(spec, brokers)
        except TopicError as exc:
            return exc
        if await self.zk.exists(z.delete_topic_path(spec.name)) is not None:
            return TopicError(
                ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{spec.name}' is marked for deletion."
            )
        if await self.zk.exists(z.topic_path(spec.name)) is not None:
            return TopicError(
                ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{spec.name}' already exists."
            )
        if validate_only:
            return None
        config = z.encode_topic_config(dict(spec.configs or {}))
        try:
            await self.zk.create(z.topic_config_path(spec.name), config, makepath=True)
        except NodeExistsError:  # left by an earlier attempt: this request's config wins
            await self.zk.set(z.topic_config_path(spec.name), config)
        try:
            await self.zk.create(
                z.topic_path(spec.name), z.encode_assignment(assignment), makepath=True
            )
        except NodeExistsError:
            return TopicError(
                ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{spec.name}' already exists."
            )
        log.info("created topic %s: %s", spec.name, assignment)
        return None

    async def delete_topics(self, names: list[str]) -> dict[str, TopicError | None]:
        results: dict[str, TopicError | None] = {}
        for name in names:
            if await self.zk.exists(z.topic_path(name)) is None:
                results[name] = TopicError(
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                    "This server does not host this topic-partition.",
                )
                continue
            try:
                await self.zk.create(z.delete_topic_path(name), makepath=True)
            except NodeExistsError:
                pass  # already marked: the deletion is under way
            results[name] = None
        return results

    async def create_partitions(
        self, requests: list[tuple[str, int, list[list[int]] | None]], validate_only: bool
    ) -> dict[str, TopicError | None]:
        """The topic's assignment znode gets the added partitions (a versioned write: a
        concurrent change makes this request fail rather than lose the other); the
        controller sees the change and starts them."""
        brokers = await self.live_brokers()
        results: dict[str, TopicError | None] = {}
        for topic, count, assignment in requests:
            results[topic] = await self._add_partitions(
                topic, count, assignment, brokers, validate_only
            )
        return results

    async def _add_partitions(
        self, topic, count, assignment, brokers, validate_only
    ) -> TopicError | None:
        if await self.zk.exists(z.delete_topic_path(topic)) is not None:
            return TopicError(
                ErrorCode.INVALID_TOPIC_EXCEPTION, f"The topic '{topic}' is queued for deletion."
            )
        for _ in range(3):  # another writer between our read and write: read again
            found = await self.zk.get(z.topic_path(topic))
            current = z.decode_assignment(topic, found[0]) if found is not None else None
            if found is not None and z.decode_reassignments(topic, found[0]):
                return TopicError(
                    ErrorCode.REASSIGNMENT_IN_PROGRESS,
                    f"A partition reassignment of '{topic}' is in progress.",
                )
            try:
                added = self.plan_partitions(topic, current, count, assignment, brokers)
            except TopicError as exc:
                return exc
            if validate_only:
                return None
            try:
                await self.zk.set(
                    z.topic_path(topic), z.encode_assignment({**current, **added}), found[1].version
                )
            except (BadVersionError, NoNodeError):
                continue
            log.info("topic %s: partitions %s added: %s", topic, sorted(added), added)
            return None
        return TopicError(
            ErrorCode.REASSIGNMENT_IN_PROGRESS,
            f"The assignment of '{topic}' kept changing meanwhile; try again.",
        )

    async def read_config(self, resource: ResourceType, entity: str) -> dict[str, str]:
        entity_path = f"{_entity_type(resource)}/{entity}"
        found = await self.zk.get(z.config_path(entity_path))
        return z.decode_config(entity_path, found[0]) if found is not None else {}

    async def write_config(self, resource: ResourceType, entity: str, overrides: dict) -> None:
        """Store a topic's overrides or a broker entity's dynamic configs, then tell every
        broker through a change notification (as Kafka's AdminZkClient)."""
        await write_entity_config(self.zk, f"{_entity_type(resource)}/{entity}", overrides)

    async def read_user_configs(self, users: list[str] | None) -> dict[str, dict[str, str]]:
        return await read_user_configs(self.zk, users)

    async def write_user_config(self, user: str, config: dict[str, str]) -> None:
        await write_entity_config(self.zk, user_entity(user), config)

    def auto_create(self, name: str) -> None:
        if name in self._auto_creating:
            return
        self._auto_creating.add(name)

        async def create() -> None:
            try:
                result = await self.create_topics([TopicSpec(name)], validate_only=False)
                error = result.get(name)
                if error is not None and error.code != ErrorCode.TOPIC_ALREADY_EXISTS:
                    log.info("not auto-creating %r: %s", name, error.message)
            finally:
                self._auto_creating.discard(name)

        self.spawn(create())


def _entity_type(resource: ResourceType) -> str:
    """The config entity type (ZooKeeper path segment) of a config resource."""
    return "topics" if resource == ResourceType.TOPIC else "brokers"
