"""Topic administration: what CreateTopics, DeleteTopics and auto-creation ask for, checked
and planned once, carried out by the controller of the broker's mode.

`TopicAdmin` validates a request and plans the replicas (broker/controller/placement.py)
from the live brokers the metadata cache knows. Carrying it out is the mode's: a single
broker's local controller applies it at once (broker/server/modes/local.py); in a cluster
it is written to ZooKeeper for the controller to act on (broker/server/modes/zk_topic_admin.py).
Either way the requests complete when the metadata cache shows the result.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from broker.cluster import TopicError, TopicSpec
from broker.config.definition import ConfigError
from broker.controller.placement import PlacementError, assign_replicas
from broker.protocol.errors import ErrorCode
from broker.protocol.topic import topic_name_problem
from broker.server.dynamic_config import ResourceType
from broker.server.metadata import MetadataCache
from broker.server.topic_config import TopicConfigs, apply_overrides


def check_topic_name(name: str) -> None:
    problem = topic_name_problem(name)
    if problem is not None:
        raise TopicError(
            ErrorCode.INVALID_TOPIC_EXCEPTION, f"Topic name {name!r} is illegal: {problem}"
        )


class TopicAdmin:
    """Checks and plans topic requests; subclasses carry them out."""

    def __init__(
        self,
        metadata: MetadataCache,
        topic_configs: TopicConfigs,
        default_partitions: int,
        default_replication_factor: int,
    ) -> None:
        self.metadata = metadata
        self.topic_configs = topic_configs
        self.default_partitions = default_partitions
        self.default_replication_factor = default_replication_factor

    def plan(
        self, spec: TopicSpec, brokers: dict[int, str | None] | None = None
    ) -> dict[int, list[int]]:
        """The replica assignment of a new topic over `brokers` (id -> rack; by default
        the live brokers of the metadata cache), or TopicError saying why not."""
        check_topic_name(spec.name)
        if spec.name in self.metadata.topics:
            raise TopicError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{spec.name}' already exists.")
        try:
            apply_overrides(self.topic_configs.default, dict(spec.configs or {}))
        except ConfigError as exc:
            raise TopicError(ErrorCode.INVALID_CONFIG, str(exc)) from None
        if brokers is None:
            brokers = {b.broker_id: b.rack for b in self.metadata.brokers.values()}
        if spec.assignment is not None:
            return self._check_assignment(spec, brokers)
        partitions = self.default_partitions if spec.partitions == -1 else spec.partitions
        factor = (
            self.default_replication_factor
            if spec.replication_factor == -1
            else spec.replication_factor
        )
        if partitions <= 0:
            raise TopicError(
                ErrorCode.INVALID_PARTITIONS, "Number of partitions must be larger than 0."
            )
        if factor <= 0:
            raise TopicError(
                ErrorCode.INVALID_REPLICATION_FACTOR, "Replication factor must be larger than 0."
            )
        if factor > len(brokers):
            raise TopicError(
                ErrorCode.INVALID_REPLICATION_FACTOR,
                f"Replication factor: {factor} larger than available brokers: {len(brokers)}.",
            )
        try:
            return assign_replicas(brokers, partitions, factor)
        except PlacementError as exc:
            raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, str(exc)) from None

    @staticmethod
    def _check_assignment(spec: TopicSpec, brokers: dict) -> dict[int, list[int]]:
        assignment = spec.assignment or {}
        if spec.partitions != -1 or spec.replication_factor != -1:
            raise TopicError(
                ErrorCode.INVALID_REQUEST,
                "Both numPartitions or replicationFactor and replicasAssignments were set. "
                "Both cannot be used at the same time.",
            )
        if sorted(assignment) != list(range(len(assignment))):
            raise TopicError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"Partitions should be numbered from 0 without gaps, not {sorted(assignment)}.",
            )
        sizes = {len(replicas) for replicas in assignment.values()}
        if len(sizes) != 1 or 0 in sizes:
            raise TopicError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                "All partitions should have the same, non-zero number of replicas.",
            )
        for partition, replicas in assignment.items():
            if len(set(replicas)) != len(replicas):
                raise TopicError(
                    ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    f"Duplicate brokers not allowed in the replicas of partition {partition}: "
                    f"{replicas}.",
                )
            unknown = sorted(set(replicas) - set(brokers))
            if unknown:
                raise TopicError(
                    ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    f"Unknown broker(s) {unknown} in the replicas of partition {partition}.",
                )
        return {p: list(r) for p, r in sorted(assignment.items())}

    def plan_partitions(
        self,
        topic: str,
        current: dict[int, list[int]] | None,
        count: int,
        assignment: list[list[int]] | None,
        brokers: dict[int, str | None] | None = None,
    ) -> dict[int, list[int]]:
        """The replicas of the partitions CreatePartitions adds to `topic` (whose present
        assignment is `current`, None when it does not exist) to reach `count`, as Kafka
        places them: the walk of the topic's first placement continued, or the replicas
        the request names; TopicError saying why not."""
        if not current:
            raise TopicError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{topic}' does not exist."
            )
        if count <= len(current):
            raise TopicError(
                ErrorCode.INVALID_PARTITIONS,
                f"Topic currently has {len(current)} partitions, which is higher than or "
                f"equal to the requested {count}.",
            )
        if brokers is None:
            brokers = {b.broker_id: b.rack for b in self.metadata.brokers.values()}
        factor = len(current[min(current)])
        first = len(current)
        added = count - first
        if assignment is not None:
            if len(assignment) != added:
                raise TopicError(
                    ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    f"Increasing the number of partitions by {added} but {len(assignment)} "
                    "assignments provided.",
                )
            planned = dict(enumerate(assignment, start=first))
            for partition, replicas in planned.items():
                if len(replicas) != factor:
                    raise TopicError(
                        ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                        f"Inconsistent replication factor between partitions, partition 0 has "
                        f"{factor} while partition {partition} has replication factor "
                        f"{len(replicas)}.",
                    )
            checked = TopicSpec(topic, assignment={p - first: r for p, r in planned.items()})
            self._check_assignment(checked, brokers)
            return {p: list(r) for p, r in planned.items()}
        ordered = sorted(brokers)
        leader = current[min(current)][0]
        start = ordered.index(leader) if leader in ordered else 0
        try:
            return assign_replicas(brokers, added, factor, start_index=start, first_partition=first)
        except PlacementError as exc:
            raise TopicError(ErrorCode.INVALID_REPLICATION_FACTOR, str(exc)) from None

    async def wait_until(
        self, names: list[str], done: Callable[[str], bool], timeout_ms: int
    ) -> set[str]:
        """Wait until `done(name)` holds for every name, re-checked whenever the metadata
        cache changes, at most `timeout_ms`. Returns the names still not done."""
        pending = {name for name in names if not done(name)}
        if not pending:
            return pending
        loop = asyncio.get_running_loop()
        changed = asyncio.Event()

        def on_update(topics: set[str]) -> None:
            changed.set()

        self.metadata.listeners.append(on_update)
        try:
            deadline = loop.time() + timeout_ms / 1000
            while pending and (remaining := deadline - loop.time()) > 0:
                try:
                    await asyncio.wait_for(changed.wait(), remaining)
                except TimeoutError:
                    pass
                changed.clear()
                pending = {name for name in pending if not done(name)}
        finally:
            self.metadata.listeners.remove(on_update)
        return pending

    # -- carried out by the mode ---------------------------------------------------------
    async def create_topics(
        self, specs: list[TopicSpec], validate_only: bool
    ) -> dict[str, TopicError | None]:
        raise NotImplementedError

    async def delete_topics(self, names: list[str]) -> dict[str, TopicError | None]:
        raise NotImplementedError

    async def create_partitions(
        self, requests: list[tuple[str, int, list[list[int]] | None]], validate_only: bool
    ) -> dict[str, TopicError | None]:
        """(topic, new partition count, replicas of the added partitions or None)."""
        raise NotImplementedError

    def auto_create(self, name: str) -> None:
        """Create `name` with the broker's defaults, as Metadata does when allowed."""
        raise NotImplementedError

    async def read_config(self, resource: ResourceType, entity: str) -> dict[str, str]:
        """The stored dynamic configs of a topic or a broker entity (what every broker
        follows; this broker's own view may lag a change made elsewhere)."""
        raise NotImplementedError

    async def write_config(self, resource: ResourceType, entity: str, overrides: dict) -> None:
        """Store the whole set of dynamic configs of a topic or a broker entity (checked
        already, broker/server/dynamic_config.py), where every broker of the mode reads it."""
        raise NotImplementedError

    async def read_user_configs(self, users: list[str] | None) -> dict[str, dict[str, str]]:
        """The stored config maps (SCRAM credentials as Kafka stores them,
        broker/security/user_scram.py) of `users`, None: of every user; users without
        one are left out."""
        raise NotImplementedError

    async def write_user_config(self, user: str, config: dict[str, str]) -> None:
        """Store a user's whole config map where every broker's authenticator reads it."""
        raise NotImplementedError
