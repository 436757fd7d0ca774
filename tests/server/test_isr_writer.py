"""The leader's ISR writer against a real ZooKeeper: the ISR changes proposed in one turn
of the event loop are written as a few multis, each partition's update conditional on
its own version, with one notification for the controller (issue 23: a broker
restarting under a thousand partitions cost a ZooKeeper request per partition)."""

from __future__ import annotations

import asyncio

from broker.cluster import LeaderAndIsr
from broker.metrics.state import isr_writer_families
from broker.server.modes import isr_writer
from broker.server.modes.isr_writer import ZkIsrWriter
from broker.zk import layout as z
from broker.zk.client import ConnectionLoss, ZkClient
from tests.helpers.aio import run, until

ME = 1


class LedPartition:
    """What the writer reads and tells of a partition this broker leads."""

    def __init__(self, topic: str, index: int) -> None:
        self.topic, self.index = topic, index
        self.leader_epoch, self.controller_epoch, self.zk_version = 3, 1, 0
        self.is_leader = True
        self.isr: tuple[int, ...] = (ME, 2)
        self.outcome: str | None = None

    def apply_isr(self, isr: tuple[int, ...], zk_version: int) -> None:
        self.isr, self.zk_version, self.outcome = isr, zk_version, "applied"

    def abandon_isr_change(self) -> None:
        self.outcome = "abandoned"


def test_a_turn_of_isr_changes_is_a_few_requests_and_one_notification(zk_connect, monkeypatch):
    monkeypatch.setattr(isr_writer, "NOTIFICATION_DELAY_S", 0.05)

    async def scenario():
        zk = ZkClient(zk_connect, session_timeout_ms=6000)
        await zk.start()
        try:
            await zk.ensure_paths([z.ISR_CHANGE_NOTIFICATION])
            partitions = [LedPartition("big", p) for p in range(1000)]
            await zk.ensure_paths([z.partitions_path("big")])
            state = z.encode_partition_state(LeaderAndIsr(ME, 3, (ME, 2), 1, 0))
            await zk.commit_each(
                [
                    [("create", path.rsplit("/", 1)[0], b""), ("create", path, state)]
                    for path in (z.partition_state_path("big", p.index) for p in partitions)
                ]
            )
            # The controller wrote two of them meanwhile: a new epoch, and at our epoch.
            await zk.set(
                z.partition_state_path("big", 10),
                z.encode_partition_state(LeaderAndIsr(2, 4, (2,), 2, 0)),
            )
            await zk.set(
                z.partition_state_path("big", 20),
                z.encode_partition_state(LeaderAndIsr(ME, 3, (ME,), 2, 0)),
            )
            tasks: set[asyncio.Task] = set()
            writer = ZkIsrWriter(zk, ME, lambda coro: _keep(tasks, coro))
            for p in partitions:  # the shrink check: one turn of the loop
                writer.write(p, (ME, 3))
            await until(lambda: all(p.outcome for p in partitions), "every change answered")
            assert writer.batches == 1
            requests = writer.counts.requests
            # one multi per <= 1,000 partitions, split around the two that lost, and
            # the two lost partitions read together
            assert requests <= 12, requests
            assert partitions[10].outcome == "abandoned"  # a new epoch: its LeaderAndIsr follows
            assert (partitions[20].outcome, partitions[20].isr) == ("applied", (ME,))
            assert all(p.isr == (ME, 3) and p.zk_version == 1 for p in partitions[21:])
            _, stat = await zk.get(z.partition_state_path("big", 999))
            assert stat.version == 1
            notifications = await until(lambda: zk.get_children(z.ISR_CHANGE_NOTIFICATION))
            assert len(notifications) == 1
            data, _ = await zk.get(f"{z.ISR_CHANGE_NOTIFICATION}/{notifications[0]}")
            # every one written, and only those (20 took the controller's ISR as it is)
            assert len(z.decode_isr_change(data)) == 998
            families = {f.name: f for f in isr_writer_families(writer)}
            assert families["kafka_isr_write_batches"].samples[0].value == 1
            assert families["kafka_isr_write_zookeeper_requests"].samples[0].value == requests + 1
            await writer.close()
        finally:
            await zk.close()

    run(scenario())


def _keep(tasks: set, coro) -> asyncio.Task:
    task = asyncio.get_running_loop().create_task(coro)
    tasks.add(task)
    task.add_done_callback(tasks.discard)
    return task


def test_a_notification_lost_with_the_connection_is_published_again(zk_connect, monkeypatch):
    monkeypatch.setattr(isr_writer, "NOTIFICATION_DELAY_S", 0.01)

    async def scenario():
        zk = ZkClient(zk_connect, session_timeout_ms=6000)
        await zk.start()
        try:
            await zk.ensure_paths([z.ISR_CHANGE_NOTIFICATION, z.partitions_path("cut")])
            partition = LedPartition("cut", 0)
            path = z.partition_state_path("cut", 0)
            await zk.commit_each([[
                ("create", path.rsplit("/", 1)[0], b""),
                ("create", path, z.encode_partition_state(LeaderAndIsr(ME, 3, (ME, 2), 1, 0))),
            ]])  # fmt: skip
            tasks: set[asyncio.Task] = set()
            writer = ZkIsrWriter(zk, ME, lambda coro: _keep(tasks, coro))
            create, failures = writer.zk.create, []

            async def lost_once(*args, **kwargs):
                if not failures:
                    failures.append(args[0])
                    raise ConnectionLoss()
                return await create(*args, **kwargs)

            writer.zk.create = lost_once
            writer.write(partition, (ME,))
            notifications = await until(lambda: zk.get_children(z.ISR_CHANGE_NOTIFICATION))
            assert len(failures) == 1 and len(notifications) == 1
            (name,) = notifications
            data, _ = await zk.get(f"{z.ISR_CHANGE_NOTIFICATION}/{name}")
            assert z.decode_isr_change(data) == [("cut", 0)]
        finally:
            await zk.close()

    run(scenario())
