"""A controller event cut short by a lost ZooKeeper connection (the session lives on):
the watch it was setting is not set and its work is half done, so once reconnected the
controller takes its place again from what ZooKeeper holds (F2 in docs/faults.md;
docs/contracts/cluster.md, "Controller failover"). Against the in-memory store, which
drops the connection as kazoo does (every set watch fires) and fails the call in flight
with ConnectionLoss; test_controller.py has the same against a real ZooKeeper.
"""

from __future__ import annotations

from broker.controller.controller import Controller
from tests.controller.memory_store import MemoryStore, RecordingChannels
from tests.controller.test_controller_events import Cluster
from tests.helpers.aio import run, settle


def test_a_topic_change_cut_short_is_taken_up_once_reconnected():
    async def scenario():
        async with Cluster(3) as c:
            epoch = c.store.epoch
            c.store.cut = {"topic_names"}  # the TopicChange's read, with its watch
            c.store.create_topic("a", {0: [1, 2, 0]})
            c.store.disconnect()
            await c.settle()
            assert ("a", 0) not in c.store.states
            assert c.active.is_active and c.store.epoch == epoch

            c.store.reconnect()
            await c.settle()
            # Taken up as a new controller would: a new epoch, everything read again.
            assert c.store.epoch == epoch + 1
            assert c.store.states[("a", 0)].leader == 1
            assert c.leaderships(1, "a", 0)

            # The watch on /brokers/topics is set again: a later topic starts.
            await c.topic("b", {0: [2, 0, 1]})
            assert c.store.states[("b", 0)].leader == 2
            assert c.leaderships(2, "b", 0)

    run(scenario())


def test_a_controller_election_whose_answer_was_lost_completes_once_reconnected():
    """/controller was created but the answer lost: ours, yet nobody acts as controller."""

    async def scenario():
        store = MemoryStore()
        for broker_id in range(2):
            store.register(broker_id)
        store.cut_after = {"create_controller"}
        store.connected = False
        controller = Controller(
            0, store, RecordingChannels(), listener="PLAINTEXT", unclean_default=False
        )

        async def quiet():
            await settle(lambda: controller.queue_size or controller.state.value != "Idle")

        controller.start()
        try:
            await quiet()
            assert store.controller == 0 and not controller.is_active
            store.reconnect()
            await quiet()
            assert controller.is_active and store.epoch == 1
        finally:
            await controller.stop()

    run(scenario())


def test_a_follower_that_lost_its_controller_watch_runs_once_reconnected():
    async def scenario():
        async with Cluster(2) as c:
            follower = await c.controller(1)
            assert follower.active_controller == 0
            # The connection drops: broker 1's /controller watch fires, and its read fails;
            # meanwhile broker 0 goes.
            c.store.cut = {"read_controller"}
            c.store.disconnect()
            await c.active.stop()
            await c.settle()
            assert c.store.controller is None and not follower.is_active

            c.store.reconnect()
            await c.settle()
            assert follower.is_active and c.store.controller == 1

    run(scenario())
