"""A group's committed offsets through a broker crash: a single broker restarted keeps
them; in a 3-broker cluster the coordinator killed hands the group to the new leader of its
`__consumer_offsets` partition, and the members resume from what they committed."""

from __future__ import annotations

import pytest
from confluent_kafka.admin import AdminClient

from broker.coordinator.offsets_topic import OFFSETS_TOPIC, partition_for
from broker.processes import BrokerProcess
from tests.helpers.cluster import (
    FAST_FAILOVER,
    Traffic,
    create_topic,
    fresh,
    leaders,
    partition_state,
    wait_for,
)
from tests.helpers.group_history import (
    check_history,
    consumed_to,
    read_events,
    wait_assigned,
    wait_consumed_past,
)
from tests.helpers.group_member import MemberProcess, MemberSpec, MemberThread
from tests.helpers.group_state import (
    committed_offsets,
    coordinator_of,
    wait_committed_to_end,
)

pytestmark = [pytest.mark.clients, pytest.mark.slow]

PARTITIONS = 4
OFFSETS_PARTITIONS = 3


def test_committed_offsets_survive_a_broker_restart(group_settings, tmp_path):
    broker = BrokerProcess(tmp_path / "logs", group_settings).start()
    try:
        bootstrap = broker.bootstrap
        topic, group = fresh("restart"), fresh("restart-group")
        create_topic(broker, topic, PARTITIONS, factor=1)

        def consume_all(name: str) -> dict:
            member = MemberThread(
                MemberSpec(name, bootstrap, group, topic, tmp_path / f"{name}.events")
            ).start()
            ends = wait_committed_to_end(bootstrap, group, topic, PARTITIONS)
            member.close()
            return ends

        with Traffic(bootstrap, topic, partitions=PARTITIONS) as first:
            first.wait_acked(300)
        before = consume_all("before")

        broker.kill()  # a crash: nothing flushed on the way out
        broker.start()
        wait_for(lambda: committed_offsets(bootstrap, group) == before, "offsets after restart")

        with Traffic(bootstrap, topic, partitions=PARTITIONS) as second:
            second.wait_acked(300)
        consume_all("after")
    finally:
        broker.stop()

    logs = {name: read_events(tmp_path / f"{name}.events") for name in ("before", "after")}
    produced = set(first.positions) | set(second.positions)
    # "after" started each partition exactly at the offset committed before the crash.
    assert check_history(logs, produced, ended={}) == {}
    starts = {}
    for e in logs["after"]:
        if e["ev"] == "consumed":
            starts.setdefault(e["p"], e["o"])
    assert starts == {p: before[(topic, p)] for p in range(PARTITIONS)}


def test_the_group_moves_with_its_offsets_partition_when_the_coordinator_dies(
    cluster_factory, group_settings, tmp_path
):
    cluster = cluster_factory(
        3,
        overrides={
            **group_settings,
            **FAST_FAILOVER,
            "offsets.topic.replication.factor": "3",
            "offsets.topic.num.partitions": str(OFFSETS_PARTITIONS),
        },
    )
    bootstrap = cluster.bootstrap
    topic, group = fresh("failover"), fresh("failover-group")
    create_topic(cluster, topic, PARTITIONS, factor=3)

    def member(name: str) -> MemberProcess:
        events = tmp_path / f"{name}.events"
        spec = MemberSpec(name, bootstrap, group, topic, events, session_timeout_ms=10_000)
        return MemberProcess(spec).start()

    members = [member("m1"), member("m2")]
    admin = AdminClient({"bootstrap.servers": bootstrap})
    offsets_partition = partition_for(group, OFFSETS_PARTITIONS)

    def coordinator(asking) -> int | None:
        return coordinator_of(cluster.broker(asking).bootstrap, group)

    def partition_leaders(asking) -> dict[int, tuple]:
        """What each broker in `asking` has as the offsets partition's state."""
        return {
            i: partition_state(cluster.broker(i).bootstrap, OFFSETS_TOPIC, offsets_partition)
            for i in asking
        }

    try:
        with Traffic(bootstrap, topic, partitions=PARTITIONS, rate=200) as traffic:
            wait_assigned(members, PARTITIONS, "two members sharing the partitions")
            traffic.wait_acked(300)
            wait_consumed_past(members, dict.fromkeys(range(PARTITIONS), 20), "consuming")
            dead = coordinator(cluster.ids[0])
            assert dead == leaders(admin, OFFSETS_TOPIC)[offsets_partition][0]
            at_kill = committed_offsets(bootstrap, group)

            cluster.kill(dead)
            alive = [i for i in cluster.ids if i != dead]

            seen: list = []  # what the live brokers answered, for a failure's message

            def moved():
                found = {coordinator(i) for i in alive}
                seen[:] = [found, partition_leaders(alive)]
                (one,) = found if len(found) == 1 else (None,)
                return [one] if one not in (None, dead) else None  # broker 0 is falsy

            try:
                (successor,) = wait_for(moved, "a new coordinator")
            except AssertionError as exc:
                raise AssertionError(f"{exc}; coordinators named, leaders seen: {seen}") from None
            leader = wait_for(lambda: leaders(admin, OFFSETS_TOPIC), "offsets partitions led")
            assert successor == leader[offsets_partition][0]
            assert coordinator(alive[1]) == successor
            # The group's offsets are there, and grow: the members commit to it.
            wait_for(
                lambda: all(
                    committed_offsets(bootstrap, group).get(tp, -1) > o for tp, o in at_kill.items()
                ),
                "commits to the new coordinator",
            )
            reached = consumed_to(members)
            traffic.wait_acked(len(traffic.acked) + 400)
            wait_consumed_past(members, reached, "consuming after the failover")
        wait_committed_to_end(bootstrap, group, topic, PARTITIONS)
        for m in members:
            m.close()
    finally:
        for m in members:
            m.stop_quietly()

    assert traffic.errors == []
    logs = {m.spec.name: read_events(m.spec.events) for m in members}
    # Nothing skipped; a partition that changed owners was read again only from the last
    # commit its previous owner saw succeed (check_history's rules), so every duplicate is
    # in that uncommitted window.
    check_history(logs, set(traffic.positions), ended={})
