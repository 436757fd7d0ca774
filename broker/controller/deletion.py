"""Topic deletion (`/admin/delete_topics`, written by DeleteTopics): the topic leaves
every broker's metadata at once (leader LEADER_DURING_DELETE), each replica is stopped
and deleted, and only when every replica has confirmed -- a broker that is down gets its
StopReplica when it returns -- do the topic's znodes go (Kafka's TopicDeletionManager).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING

from broker.controller.context import ControllerContext
from broker.controller.events import ReplicaDeleted, TopicDeletion

if TYPE_CHECKING:
    from broker.controller.controller import Controller

log = logging.getLogger(__name__)


async def topics_marked(c: Controller) -> None:
    """Start deleting each topic newly marked; a mark for an unknown topic goes."""
    ctx = c.ctx
    if ctx is None:
        return
    for topic in await c.store.topics_to_delete(c.watch(TopicDeletion())):
        if topic not in ctx.assignments:
            await c.store.unmark_deletion(topic)  # nothing to delete
            continue
        if topic in ctx.deleting:
            continue
        log.info("deleting topic %s", topic)
        ctx.deleting.add(topic)
        partitions = [(topic, p) for p in ctx.assignments[topic]]
        c.send_update_metadata(partitions)  # gone from every broker's metadata
        resume(c, set(ctx.live), topics=[topic])
        await _maybe_finish(c, topic)


def resume(c: Controller, brokers: set[int], topics: Iterable[str] | None = None) -> None:
    """Ask `brokers` to delete their replicas of the topics being deleted (or of
    `topics`) that they have not confirmed yet; each answer is a ReplicaDeleted event."""
    ctx = c.ctx
    for topic in list(topics if topics is not None else ctx.deleting):
        for broker_id in brokers:
            replicas = [
                (topic, p) for p, r in ctx.assignments.get(topic, {}).items() if broker_id in r
            ]
            if replicas and (topic, broker_id) not in ctx.deleted_replicas:
                c.send_stop_replica(
                    broker_id,
                    replicas,
                    delete=True,
                    on_done=lambda b=broker_id, t=topic: c.enqueue(ReplicaDeleted(t, b)),
                )


async def replica_deleted(c: Controller, topic: str, broker_id: int) -> None:
    if c.ctx is None or topic not in c.ctx.deleting:
        return
    c.ctx.deleted_replicas.add((topic, broker_id))
    await _maybe_finish(c, topic)


def every_replica_deleted(ctx: ControllerContext, topic: str) -> bool:
    """Every broker holding a replica of `topic` (a dead one too) has deleted it."""
    holders = {b for replicas in ctx.assignments.get(topic, {}).values() for b in replicas}
    return holders <= {b for t, b in ctx.deleted_replicas if t == topic}


async def _maybe_finish(c: Controller, topic: str) -> None:
    if not every_replica_deleted(c.ctx, topic):
        return  # some replica (maybe on a dead broker) still has it
    await c.store.delete_topic(topic)
    c.ctx.forget_topic(topic)
    log.info("topic %s deleted", topic)
