"""The controller's requests to brokers, built from its context alone: pure functions,
one request per broker for the partitions named (the wire schemas are the LeaderAndIsr,
UpdateMetadata and StopReplica declarations of broker/protocol/; what each field means
is in docs/contracts/cluster.md).

The controller sends what these return through its channels (broker/controller/
channels.py); nothing here touches the network or ZooKeeper.
"""

from __future__ import annotations

from collections.abc import Iterable

from broker.cluster import (
    LEADER_DURING_DELETE,
    SECURITY_PROTOCOL_IDS,
    BrokerRegistration,
    Endpoint,
    TopicPartition,
)
from broker.controller.context import ControllerContext


def endpoint_for(registration: BrokerRegistration, listener: str) -> Endpoint:
    """Where the controller reaches a broker: its inter-broker listener, else its first."""
    return registration.endpoint(listener) or registration.endpoints[0]


def leader_and_isr(
    ctx: ControllerContext,
    partitions: Iterable[TopicPartition],
    *,
    only: set[int] | None = None,
    new: set[TopicPartition] = frozenset(),
) -> dict[int, dict]:
    """Per live replica of `partitions` (of `only` when given; brokers shutting down get
    none), its LeaderAndIsr: each partition's state, replicas and move under way, and
    where its leaders are. Partitions without a state are left out."""
    per_broker: dict[int, dict[str, list[dict]]] = {}
    leaders: dict[int, set[int]] = {}
    for tp in partitions:
        state = ctx.states.get(tp)
        if state is None:
            continue
        replicas = ctx.replicas(tp)
        entry = None  # the same for every replica: built once, shared by their requests
        for broker_id in replicas:
            if not ctx.is_live(broker_id) or (only is not None and broker_id not in only):
                continue
            if broker_id in ctx.shutting_down:
                continue
            if entry is None:
                moving = ctx.reassigning.get(tp)
                entry = {
                    "partition_index": tp[1],
                    "controller_epoch": state.controller_epoch,
                    "leader": state.leader,
                    "leader_epoch": state.leader_epoch,
                    "isr": list(state.isr),
                    "zk_version": state.zk_version,
                    "replicas": list(replicas),
                    "adding_replicas": list(moving.adding) if moving else [],
                    "removing_replicas": list(moving.removing) if moving else [],
                    "is_new": tp in new,
                }
            per_broker.setdefault(broker_id, {}).setdefault(tp[0], []).append(entry)
            leaders.setdefault(broker_id, set()).add(state.leader)
    bodies: dict[int, dict] = {}
    for broker_id, topics in per_broker.items():
        live_leaders = []
        for leader in sorted(leaders[broker_id]):
            registration = ctx.live.get(leader)
            if registration is None:
                continue
            endpoint = endpoint_for(registration, ctx.listener)
            live_leaders.append(
                {"broker_id": leader, "host_name": endpoint.host, "port": endpoint.port}
            )
        bodies[broker_id] = {
            "controller_id": ctx.controller_id,
            "controller_epoch": ctx.epoch,
            "broker_epoch": ctx.live[broker_id].epoch,
            "topic_states": _by_topic(topics),
            "live_leaders": live_leaders,
        }
    return bodies


def update_metadata(
    ctx: ControllerContext, partitions: Iterable[TopicPartition]
) -> dict[int, dict]:
    """Per live broker, the same UpdateMetadata: the partitions' states (a topic being
    deleted with leader LEADER_DURING_DELETE, so brokers drop it) and every live broker."""
    topics: dict[str, list[dict]] = {}
    for tp in partitions:
        replicas = ctx.replicas(tp)
        state = ctx.states.get(tp)
        if state is None and tp[0] not in ctx.deleting:
            continue
        deleting = tp[0] in ctx.deleting
        topics.setdefault(tp[0], []).append(
            {
                "partition_index": tp[1],
                "controller_epoch": state.controller_epoch if state else ctx.epoch,
                "leader": LEADER_DURING_DELETE if deleting else state.leader,
                "leader_epoch": state.leader_epoch if state else 0,
                "isr": list(state.isr) if state else [],
                "zk_version": state.zk_version if state else 0,
                "replicas": list(replicas),
                "offline_replicas": ctx.offline_replicas(tp),
            }
        )
    live_brokers = [
        {
            "id": registration.broker_id,
            "endpoints": [
                {
                    "port": e.port,
                    "host": e.host,
                    "listener": e.listener,
                    "security_protocol": SECURITY_PROTOCOL_IDS.get(e.security_protocol, 0),
                }
                for e in registration.endpoints
            ],
            "rack": registration.rack,
        }
        for registration in sorted(ctx.live.values(), key=lambda r: r.broker_id)
    ]
    return {
        broker_id: {
            "controller_id": ctx.controller_id,
            "controller_epoch": ctx.epoch,
            "broker_epoch": registration.epoch,
            "topic_states": _by_topic(topics),
            "live_brokers": live_brokers,
        }
        for broker_id, registration in sorted(ctx.live.items())
    }


def stop_replica(
    ctx: ControllerContext, broker_id: int, partitions: Iterable[TopicPartition], *, delete: bool
) -> dict | None:
    """The StopReplica for `broker_id`'s replicas of `partitions` (deleting them when
    `delete`); None when there are none or the broker is not live."""
    topics: dict[str, list[int]] = {}
    for topic, partition in partitions:
        topics.setdefault(topic, []).append(partition)
    if not topics or broker_id not in ctx.live:
        return None
    return {
        "controller_id": ctx.controller_id,
        "controller_epoch": ctx.epoch,
        "broker_epoch": ctx.live[broker_id].epoch,
        "delete_partitions": delete,
        "topics": [{"name": t, "partition_indexes": sorted(p)} for t, p in sorted(topics.items())],
    }


def _by_topic(topics: dict[str, list[dict]]) -> list[dict]:
    return [{"topic_name": t, "partition_states": states} for t, states in sorted(topics.items())]
