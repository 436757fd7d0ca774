"""The group coordinator: consumer groups and committed offsets (see README.md)."""

from __future__ import annotations

from broker.coordinator.coordinator import GroupConfig, GroupCoordinator
from broker.coordinator.manager import GroupMetadataManager


def start_group_coordinator(ctx) -> GroupCoordinator:
    """The coordinator of a broker (`ctx`: its BrokerContext), following the leadership
    of the offsets partitions here from now on."""
    cfg = ctx.config
    manager = GroupMetadataManager(
        ctx,
        cfg["offsets.topic.num.partitions"],
        cfg["offsets.commit.timeout.ms"],
        cfg["offsets.load.buffer.size"],
    )
    ctx.replicas.leadership_listeners.append(manager.leadership_changed)

    def topic_exists(topic: str, partition: int) -> bool:
        known = ctx.metadata.topics.get(topic)
        return known is not None and partition in known

    coordinator = GroupCoordinator(
        manager, GroupConfig.from_broker_config(cfg), ctx.now_ms, topic_exists
    )
    coordinator.on_rebalance = lambda: ctx.metrics.rebalance_started()
    coordinator.on_offsets_stored = lambda count: ctx.metrics.offsets_committed(count)
    return coordinator
