"""The controller's events against an in-memory store and recording channels
(tests/controller/memory_store.py): what it writes, in which order, and what it sends to
whom under which state, with absences asserted once the loop has settled, not after a
sleep. test_controller.py runs the same cases against a real ZooKeeper and brokers.
"""

from __future__ import annotations

import pytest

from broker.cluster import LeaderAndIsr, NotController
from broker.controller.controller import Controller
from broker.controller.events import AutoLeaderBalance, ControllerState
from broker.metrics.state import controller_families
from broker.protocol.errors import ErrorCode
from broker.zk.layout import Reassignment
from tests.controller.memory_store import MemoryStore, RecordingChannels
from tests.helpers.aio import run, settle

S = ControllerState


def _lei(state: LeaderAndIsr) -> tuple:
    return state.leader, state.leader_epoch, state.isr


class Cluster:
    """Brokers registered in a MemoryStore, and the controllers running on it."""

    def __init__(self, brokers: int) -> None:
        self.store = MemoryStore()
        self.channels = RecordingChannels()
        self.controllers: list[Controller] = []
        self.broker_count = brokers

    async def __aenter__(self) -> Cluster:
        for broker_id in range(self.broker_count):
            self.store.register(broker_id)
        await self.controller(0)
        return self

    async def __aexit__(self, *exc) -> None:
        for controller in self.controllers:
            await controller.stop()

    async def controller(self, broker_id: int, unclean: bool = False) -> Controller:
        controller = Controller(
            broker_id,
            self.store,
            self.channels if not self.controllers else RecordingChannels(),
            listener="PLAINTEXT",
            unclean_default=unclean,
        )
        if not self.controllers:
            self.channels.controller = controller
        self.controllers.append(controller)
        controller.start()
        await self.settle()
        return controller

    @property
    def active(self) -> Controller:
        return self.controllers[0]

    async def settle(self) -> None:
        await settle(lambda: any(c.queue_size or c.state is not S.IDLE for c in self.controllers))

    async def topic(self, topic: str, assignment: dict[int, list[int]], config=None) -> None:
        self.store.create_topic(topic, assignment, config)
        await self.settle()

    def sent(self, state: ControllerState) -> list[tuple[int, str]]:
        return [(b, name) for b, name, _, s in self.channels.sent if s is state]

    def leaderships(self, broker_id: int, topic: str, partition: int) -> list[dict]:
        return [
            p
            for t, p in self.channels.partition_states(broker_id, "LeaderAndIsr")
            if (t, p["partition_index"]) == (topic, partition)
        ]

    def stopped(self, broker_id: int, topic: str, delete: bool) -> list[list[int]]:
        return [
            t["partition_indexes"]
            for body in self.channels.to(broker_id, "StopReplica")
            if body["delete_partitions"] is delete
            for t in body["topics"]
            if t["name"] == topic
        ]


def test_each_event_runs_under_its_state_and_is_counted():
    async def scenario():
        async with Cluster(2) as c:
            controller = c.active
            assert controller.is_active and controller.state is S.IDLE
            assert controller.stats.count("Startup") == 1
            c.store.register(2)
            await c.settle()
            # The new broker gets the whole picture, sent while the BrokerChange ran.
            assert (2, "UpdateMetadata") in c.sent(S.BROKER_CHANGE)
            assert controller.stats.count("BrokerChange") == 1
            families = {f.name: f for f in controller_families(controller)}
            state = {s.labels["state"]: s.value for s in families["kafka_controller_state"].samples}
            assert state["Idle"] == 1 and sum(state.values()) == 1
            counts = {
                (s.labels["event"], s.labels["state"]): s.value
                for s in families["kafka_controller_event_duration_seconds"].samples
                if s.name.endswith("_count")
            }
            assert counts[("BrokerChange", "BrokerChange")] == 1
            assert counts[("Startup", "ControllerChange")] == 1

    run(scenario())


def test_a_new_topic_one_request_per_broker_per_kind():
    async def scenario():
        async with Cluster(3) as c:
            await c.topic("t", {0: [1, 2, 0], 1: [2, 0, 1]})
            assert c.store.states[("t", 1)] == LeaderAndIsr(2, 0, (2, 0, 1), 1, 0)
            assert c.store.writes[-2:] == [("create state", ("t", 0)), ("create state", ("t", 1))]
            for broker_id in range(3):
                # Both partitions in one LeaderAndIsr, then one UpdateMetadata.
                mine = [s for s in c.sent(S.TOPIC_CHANGE) if s[0] == broker_id]
                assert mine == [(broker_id, "LeaderAndIsr"), (broker_id, "UpdateMetadata")]
                (p,) = c.leaderships(broker_id, "t", 0)
                assert (p["leader"], p["isr"], p["is_new"]) == (1, [1, 2, 0], True)

    run(scenario())


def test_new_partitions_of_a_topic_are_elected():
    async def scenario():
        async with Cluster(2) as c:
            await c.topic("t", {0: [0, 1]})
            c.store.add_partitions("t", {1: [1, 0]})
            await c.settle()
            assert c.store.states[("t", 1)].leader == 1
            assert c.active.stats.count("PartitionModifications") == 1
            assert (1, "LeaderAndIsr") in c.sent(S.TOPIC_CHANGE)

    run(scenario())


def test_a_dead_leader_is_replaced_clean_or_unclean_as_the_topic_allows():
    async def scenario():
        async with Cluster(3) as c:
            await c.topic("t", {0: [1, 2, 0]})
            await c.topic("clean", {0: [1, 2]})
            await c.topic("dirty", {0: [1, 2]}, {"unclean.leader.election.enable": "true"})
            for topic in ("clean", "dirty"):  # the follower fell out of the ISR
                c.store.leader_writes_isr((topic, 0), (1,))
            await c.settle()
            c.store.session_ended(1)
            await c.settle()
            assert _lei(c.store.states[("t", 0)]) == (2, 1, (2, 0))
            assert _lei(c.store.states[("clean", 0)]) == (-1, 1, (1,))
            assert _lei(c.store.states[("dirty", 0)]) == (2, 1, (2,))
            # Nothing is sent to the dead broker any more.
            assert not [s for s in c.sent(S.BROKER_CHANGE) if s[0] == 1]

    run(scenario())


def test_topic_deletion_waits_for_the_dead_replica():
    async def scenario():
        async with Cluster(3) as c:
            await c.topic("doomed", {0: [1, 2]})
            c.store.session_ended(2)
            await c.settle()
            c.store.mark_for_deletion("doomed")
            await c.settle()
            assert c.stopped(1, "doomed", delete=True) == [[0]]
            (p,) = [
                p for t, p in c.channels.partition_states(0, "UpdateMetadata") if t == "doomed"
            ][-1:]
            assert p["leader"] == -2
            # Broker 1 confirmed; broker 2 is down: the topic stays, deterministically.
            assert c.active.stats.count("ReplicaDeleted") == 1
            assert "doomed" in c.store.topics and "doomed" in c.active.ctx.deleting
            assert ("delete topic", "doomed") not in c.store.writes
            c.store.register(2)
            await c.settle()
            assert c.stopped(2, "doomed", delete=True) == [[0]]
            assert "doomed" not in c.store.topics and c.store.marked_for_deletion == []
            assert c.store.writes[-2:] == [
                ("delete topic", "doomed"),
                ("unmark deletion", "doomed"),
            ]
            assert "doomed" not in c.active.ctx.assignments

    run(scenario())


def test_controlled_shutdown_moves_leadership_and_tells_the_stopping_broker_nothing_new():
    async def scenario():
        async with Cluster(3) as c:
            await c.topic("t", {0: [1, 2, 0], 1: [1]})
            code, remaining = await c.active.controlled_shutdown(1, -1)
            assert (code, remaining) == (ErrorCode.NONE, [])
            assert _lei(c.store.states[("t", 0)]) == (2, 1, (2, 0))
            await c.settle()
            assert [p["leader_epoch"] for p in c.leaderships(1, "t", 0)] == [0]
            assert c.stopped(1, "t", delete=False) == [[0]]
            assert (2, "LeaderAndIsr") in c.sent(S.CONTROLLED_SHUTDOWN)
            stale = c.store.brokers[0].epoch - 1
            assert (await c.active.controlled_shutdown(0, stale))[0] == ErrorCode.STALE_BROKER_EPOCH
            assert (await c.active.controlled_shutdown(7, -1))[0] == ErrorCode.BROKER_NOT_AVAILABLE

    run(scenario())


def test_a_fenced_controller_abdicates_and_writes_only_under_its_new_epoch():
    async def scenario():
        async with Cluster(2) as c:
            await c.topic("t", {0: [0, 1]})
            c.store.another_controller_took_over()
            moved_on = c.store.epoch
            c.store.session_ended(1)
            await c.settle()
            state = c.store.states[("t", 0)]
            assert state.isr == (0,) and state.controller_epoch == moved_on + 1
            assert c.active.ctx.epoch == moved_on + 1 and c.store.controller == 0
            assert c.active.stats.count("Reelect") == 1
            # The refused write was never stored: one state write, after the new epoch.
            assert c.store.writes[-2:] == [("controller_epoch", moved_on + 1), ("state", ("t", 0))]

    run(scenario())


def test_only_the_active_controller_answers():
    async def scenario():
        async with Cluster(2) as c:
            standby = await c.controller(1)
            assert not standby.is_active and standby.active_controller == 0
            with pytest.raises(NotController):
                await standby.elect_leaders(None, False)
            with pytest.raises(NotController):
                await standby.alter_reassignments({("t", 0): [0]})
            with pytest.raises(NotController):
                standby.reassignments(None)
            await c.active.stop()  # it resigns: /controller goes, the standby runs
            await c.settle()
            assert standby.is_active and c.store.controller == 1

    run(scenario())


async def _preferred_back_in_sync(c: Cluster) -> None:
    await c.topic("t", {0: [1, 2, 0]})
    c.store.session_ended(1)
    await c.settle()
    assert c.store.states[("t", 0)].leader == 2
    c.store.register(1)
    c.store.leader_writes_isr(("t", 0), (2, 0, 1))
    await c.settle()


def test_the_preferred_replica_election_znode():
    async def scenario():
        async with Cluster(3) as c:
            await _preferred_back_in_sync(c)
            c.store.request_preferred_election([("t", 0)])
            await c.settle()
            assert c.store.states[("t", 0)].leader == 1
            assert c.store.preferred_election is None
            assert (1, "LeaderAndIsr") in c.sent(S.MANUAL_LEADER_BALANCE)

    run(scenario())


def test_the_automatic_rebalance():
    async def scenario():
        async with Cluster(3) as c:
            await _preferred_back_in_sync(c)
            c.active.enqueue(AutoLeaderBalance(imbalance_percent=10))
            await c.settle()
            assert c.store.states[("t", 0)].leader == 1
            assert (1, "LeaderAndIsr") in c.sent(S.AUTO_LEADER_BALANCE)

    run(scenario())


def test_a_reassignment_writes_the_move_then_finishes_it_when_the_isr_catches_up():
    async def scenario():
        async with Cluster(4) as c:
            await c.topic("t", {0: [0, 1], 1: [1, 0]})
            before = len(c.store.writes)
            results = await c.active.alter_reassignments({("t", 0): [2, 3]})
            assert results == {("t", 0): (ErrorCode.NONE, None)}
            # The assignment first (a successor finds the move), then the new leader epoch.
            assert c.store.writes[before:] == [("assignment", "t"), ("state", ("t", 0))]
            assert c.store.topics["t"] == (
                {0: [2, 3, 0, 1], 1: [1, 0]},
                {0: Reassignment((2, 3), (2, 3), (0, 1))},
            )
            await c.settle()
            before = len(c.store.writes)
            c.store.leader_writes_isr(("t", 0), (0, 1, 2, 3))
            await c.settle()
            # Leadership and ISR first, then the assignment.
            assert c.store.writes[before:] == [("state", ("t", 0)), ("assignment", "t")]
            assert _lei(c.store.states[("t", 0)]) == (2, 2, (2, 3))
            assert c.store.topics["t"] == ({0: [2, 3], 1: [1, 0]}, {})
            assert c.stopped(0, "t", delete=True) == [[0]]
            assert c.stopped(1, "t", delete=True) == [[0]]
            assert c.stopped(2, "t", delete=True) == c.stopped(3, "t", delete=True) == []
            assert c.active.reassignments(None) == {}

    run(scenario())


def test_the_reassign_partitions_znode_keeps_the_moves_under_way():
    async def scenario():
        async with Cluster(3) as c:
            await c.topic("t", {0: [0, 1], 1: [0, 1]})
            c.store.request_reassignment({("t", 0): [2, 1], ("t", 1): [0, 9]})
            await c.settle()
            assert c.store.reassign_request == {("t", 0): [2, 1]}  # the refused one dropped
            assert c.active.reassignments(None) == {("t", 0): ([2, 1, 0], [2], [0])}
            c.store.leader_writes_isr(("t", 0), (0, 1, 2))
            await c.settle()
            assert c.store.reassign_request is None
            assert c.store.topics["t"][0][0] == [2, 1]

    run(scenario())


# -- ZooKeeper work: bounded per event, not per partition ------------------------------------
def _zk_work(controller: Controller, event: str) -> tuple[int, int]:
    """(requests, operations) of the event type, as the metrics export them."""
    families = {f.name: f for f in controller_families(controller)}
    return tuple(
        next(s.value for s in families[name].samples if s.labels["event"] == event)
        for name in (
            "kafka_controller_zookeeper_requests",
            "kafka_controller_zookeeper_operations",
        )
    )


def _spread(partitions: int, first: int = 0) -> dict[int, list[int]]:
    """RF=3 over brokers 0-2, the first replica (the leader) rotating from `first`."""
    return {p: [(first + p + i) % 3 for i in range(3)] for p in range(partitions)}


async def _big_topic(c: Cluster, partitions: int) -> None:
    """Topic "big" spread over brokers 0-2; the store's calls are listed from here on."""
    await c.topic("big", _spread(partitions))
    c.store.calls.clear()


def test_creating_2000_partitions_is_a_few_store_requests():
    async def scenario():
        async with Cluster(3) as c:
            await c.topic("big", _spread(2000))
            assert len(c.store.states) == 2000
            requests, operations = _zk_work(c.active, "TopicChange")
            # topic names, the topic, its config, its states, one creation of them all
            assert requests <= 5, c.store.calls
            assert operations >= 2000
            assert c.store.calls[-1] == ("create_states", 2000)

    run(scenario())


def test_a_broker_failure_under_700_led_partitions_is_a_few_store_requests():
    async def scenario():
        async with Cluster(3) as c:
            await _big_topic(c, 2100)  # each broker leads 700
            c.store.session_ended(1)
            await c.settle()
            led = [tp for tp, state in c.store.states.items() if state.leader == 1]
            assert not led
            assert all(1 not in state.isr for state in c.store.states.values())
            requests, _ = _zk_work(c.active, "BrokerChange")
            # the brokers, the topic's unclean setting, one write of all 2,100 states
            assert requests <= 4, c.store.calls
            assert ("write_states", 2100) in c.store.calls
            # ... and each broker still told once per kind of request
            assert sorted(c.sent(S.BROKER_CHANGE)) == [
                (0, "LeaderAndIsr"),
                (0, "UpdateMetadata"),
                (2, "LeaderAndIsr"),
                (2, "UpdateMetadata"),
            ]

    run(scenario())


def test_a_controlled_shutdown_and_a_controller_failover_are_a_few_store_requests():
    async def scenario():
        async with Cluster(3) as c:
            await _big_topic(c, 1500)
            code, remaining = await c.active.controlled_shutdown(2, -1)
            assert (code, remaining) == (ErrorCode.NONE, [])
            assert _zk_work(c.active, "ControlledShutdown")[0] <= 2, c.store.calls
            # The controller goes; its successor reads everything and elects, in a few.
            await c.controller(1)
            c.store.session_ended(0)
            await c.settle()
            successor = c.controllers[1]
            assert successor.is_active
            assert all(state.leader == 1 for state in c.store.states.values())
            requests, operations = _zk_work(successor, "ControllerChange")
            # A constant: activation's reads (one per kind, the states of the topic in
            # one), one write of the 1,500 states; the store is shared with the fenced
            # controller, whose last attempt is counted here as well.
            assert requests <= 25, c.store.calls
            assert operations >= 1500

    run(scenario())


def test_a_broker_that_restarted_while_nobody_was_controller_leads_nothing_it_led():
    """F1 (docs/faults.md): the controller, also a leader, loses its power and its
    unflushed writes, and registers again before the next controller takes over. That
    one finds it registered after its leaderships were decided: as a BrokerChange with
    its new epoch would, it moves them and takes it out of the ISRs, in one write."""

    async def scenario():
        async with Cluster(3) as c:
            await _big_topic(c, 300)  # each broker leads 100
            await c.active.stop()  # broker 0, the controller, is killed ...
            c.store.session_ended(0)
            c.store.register(0)  # ... and is back, with a new epoch, before anyone took over
            successor = await c.controller(1)
            assert successor.is_active and 0 in successor.ctx.live and 0 in successor.channels
            for tp, state in c.store.states.items():
                assert state.leader != 0 and 0 not in state.isr and state.leader_epoch == 1, tp
            assert [n for name, n in c.store.calls if name == "write_states"] == [300]
            # The restarted broker was told no leadership of the old epoch: it follows.
            told = [p for _, p in successor.channels.partition_states(0, "LeaderAndIsr")]
            assert len(told) == 300
            assert {(p["leader"] != 0, p["leader_epoch"]) for p in told} == {(True, 1)}
            assert {b for b, name, _, _ in successor.channels.sent} == {0, 1, 2}

    run(scenario())


def test_a_controller_taking_over_keeps_the_leaderships_of_brokers_that_did_not_restart():
    async def scenario():
        async with Cluster(3) as c:
            await _big_topic(c, 30)
            await c.active.stop()  # the controller resigns; broker 0 lives on
            successor = await c.controller(1)
            assert successor.is_active
            assert not [call for call in c.store.calls if call[0] == "write_states"]
            assert {s.leader_epoch for s in c.store.states.values()} == {0}
            led = [p for _, p in successor.channels.partition_states(0, "LeaderAndIsr")]
            assert sum(p["leader"] == 0 for p in led) == 10

    run(scenario())


class _LeadersRace(MemoryStore):
    """Leaders change the ISR of `racing` partitions just before the controller's first
    write of them lands, as a leader's conditional update can."""

    def __init__(self, racing: set) -> None:
        super().__init__()
        self.racing = set(racing)

    async def write_states(self, states, fence):
        for tp in self.racing & set(states):
            state = self.states[tp]
            self.leader_writes_isr(tp, tuple(r for r in state.isr if r != 2))
        self.racing.clear()
        return await super().write_states(states, fence)


def test_partitions_changed_meanwhile_are_read_again_and_decided_again():
    async def scenario():
        racing = {("big", p) for p in (3, 50, 51, 299)}
        c = Cluster(3)
        c.store = _LeadersRace(set())
        async with c:
            await c.topic("big", _spread(300))
            c.store.racing = set(racing)
            c.store.calls.clear()
            c.store.session_ended(1)
            await c.settle()
            for tp, state in c.store.states.items():
                assert state.leader != 1 and 1 not in state.isr, tp
                # the leaders' removal of 2 stood: decided again from what they wrote
                assert (2 in state.isr) is (tp not in racing), tp
            writes = [n for name, n in c.store.calls if name == "write_states"]
            assert writes == [300, len(racing)]
            assert ("read_states", len(racing)) in c.store.calls

    run(scenario())


def test_reassigning_500_partitions_is_a_few_store_requests():
    async def scenario():
        async with Cluster(4) as c:
            await _big_topic(c, 500)
            targets = {("big", p): [3, *replicas[1:]] for p, replicas in _spread(500).items()}
            results = await c.active.alter_reassignments(targets)
            assert set(results.values()) == {(ErrorCode.NONE, None)}
            assert len(c.active.reassignments(None)) == 500
            # one assignment write, one of the 500 states
            assert [name for name, _ in c.store.calls] == ["write_assignment", "write_states"]
            # the new replicas catch up: the moves finish together
            c.store.calls.clear()
            for tp in sorted(targets):
                c.store.leader_writes_isr(tp, (*c.store.states[tp].isr, 3))
            await c.settle()
            assert c.active.reassignments(None) == {}
            assert c.store.topics["big"][0] == {tp[1]: t for tp, t in targets.items()}
            assert sum(n for name, n in c.store.calls if name == "write_states") == 500
            assert len(c.store.calls) <= 12, c.store.calls
            # each old first replica deletes its copies in one StopReplica
            for broker_id in range(3):
                assert len(c.stopped(broker_id, "big", delete=True)) == 1

    run(scenario())
