"""The ISR of partitions a broker leads, written to ZooKeeper (the ReplicaManager's
IsrWriter in a cluster; docs/contracts/cluster.md, "ISR changes").

A leader that adds or drops followers writes the new ISR to the partition's state znode
with a conditional update (the version it last saw: a controller's newer decision wins,
and its LeaderAndIsr follows), then tells the controller through an ISR change
notification. Changes proposed in one turn of the event loop -- the shrink check walks
every partition at once, one follower fetch can bring a follower back into hundreds --
are written together, as multis of many partitions (broker/zk/client.py `commit_each`),
each partition's update still conditional on its own version; the notifications of
`NOTIFICATION_DELAY_S` go as one znode. A broker restarting under a thousand partitions
thus costs the leaders a few requests each, not a request per partition. `counts` and
`batches` are what broker/metrics/state.py reports.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from dataclasses import dataclass

from broker.cluster import LeaderAndIsr, TopicPartition
from broker.server.partition import Partition
from broker.zk import layout as z
from broker.zk.client import BadVersionError, ZkClient, ZkCounts

log = logging.getLogger(__name__)

# How long leaders collect ISR changes before one notification tells the controller.
NOTIFICATION_DELAY_S = 0.2


@dataclass(frozen=True)
class _Proposal:
    partition: Partition
    state: LeaderAndIsr  # what is written: our leadership, the new ISR, the version seen


class ZkIsrWriter:
    def __init__(
        self,
        zk: ZkClient,
        broker_id: int,
        spawn: Callable[[Coroutine], asyncio.Task],
    ) -> None:
        self.counts = ZkCounts()
        self.zk = zk.counted(self.counts)
        self.broker_id = broker_id
        self.spawn = spawn
        self.batches = 0  # batches of ISR changes written
        self._proposed: dict[TopicPartition, _Proposal] = {}
        self._changed: set[TopicPartition] = set()
        self._notify: asyncio.TimerHandle | None = None

    def write(self, partition: Partition, isr: tuple[int, ...]) -> None:
        """IsrWriter: write the ISR change to the partition's state znode (with the others
        proposed in this turn of the loop)."""
        state = LeaderAndIsr(
            self.broker_id,
            partition.leader_epoch,
            isr,
            partition.controller_epoch,
            partition.zk_version,
        )
        if not self._proposed:
            asyncio.get_running_loop().call_soon(self._take_batch)
        self._proposed[(partition.topic, partition.index)] = _Proposal(partition, state)

    def _take_batch(self) -> None:
        batch, self._proposed = self._proposed, {}
        if batch:
            self.spawn(self._write(batch))

    async def _write(self, batch: dict[TopicPartition, _Proposal]) -> None:
        self.batches += 1
        tps = list(batch)
        groups = [
            [
                (
                    "set",
                    z.partition_state_path(*tp),
                    z.encode_partition_state(batch[tp].state),
                    batch[tp].state.zk_version,
                )
            ]
            for tp in tps
        ]
        try:
            results = await self.zk.commit_each(groups)
            # Lost to a newer decision of the controller: what is there now decides.
            lost = [
                tp for tp, r in zip(tps, results, strict=True) if isinstance(r, BadVersionError)
            ]
            current = await self.zk.get_many(z.partition_state_path(*tp) for tp in lost)
        except Exception as exc:  # ZooKeeper unreachable: the next shrink/expand tries again
            log.warning("ISR changes of %d partitions not written: %s", len(tps), exc)
            for proposal in batch.values():
                proposal.partition.abandon_isr_change()
            return
        found = dict(zip(lost, current, strict=True))
        for tp, result in zip(tps, results, strict=True):
            partition, state = batch[tp].partition, batch[tp].state
            if tp in found:
                self._lost(partition, state, found[tp])
            elif isinstance(result, Exception):  # e.g. the znode gone: try again later
                log.warning("%s-%d: ISR change not written: %s", *tp, result)
                partition.abandon_isr_change()
            else:
                if partition.is_leader and partition.leader_epoch == state.leader_epoch:
                    partition.apply_isr(state.isr, result[0].version)
                self._changed.add(tp)
        self._notify_later()

    def _lost(self, partition: Partition, ours: LeaderAndIsr, found) -> None:
        """The controller decided something newer (a new epoch: its LeaderAndIsr follows),
        or, at our epoch, an ISR we take as it is."""
        current = z.decode_partition_state(found[0], found[1].version) if found else None
        if (
            current is not None
            and current.leader == self.broker_id
            and current.leader_epoch == ours.leader_epoch == partition.leader_epoch
        ):
            partition.apply_isr(current.isr, current.zk_version)
        else:
            partition.abandon_isr_change()

    def _notify_changes(self) -> None:
        self._notify = None
        self.spawn(self._publish())

    def _notify_later(self) -> None:
        if self._changed and self._notify is None:
            loop = asyncio.get_running_loop()
            self._notify = loop.call_later(NOTIFICATION_DELAY_S, self._notify_changes)

    async def _publish(self) -> None:
        changed, self._changed = sorted(self._changed), set()
        if not changed:
            return
        try:
            await self.zk.create(
                f"{z.ISR_CHANGE_NOTIFICATION}/{z.ISR_CHANGE_PREFIX}",
                z.encode_isr_change(changed),
                sequence=True,
                makepath=True,
            )
        except Exception as exc:
            # Untold, the controller would never send the other brokers the new ISRs:
            # kept, and published again once connected (a notification whose answer
            # was lost but which was created is read twice, which changes nothing).
            log.warning(
                "ISR change notification of %d partitions not written (%s): retried when connected",
                len(changed),
                exc,
            )
            self._changed.update(changed)
            self.zk.when_connected(self._notify_later)

    async def close(self) -> None:
        """Publish the changes whose notification is still waiting."""
        if self._notify is None:
            return
        self._notify.cancel()
        self._notify = None
        try:
            await self._publish()
        except Exception:
            log.warning("could not publish the last ISR changes", exc_info=True)
