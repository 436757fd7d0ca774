"""confluent-kafka (librdkafka) consumers in groups against a broker process: members as
processes of their own, so a kill is a real crash; rebalances after a kill (the session
timeout), a clean close (LeaveGroup) and a join; static membership across a restart."""

from __future__ import annotations

import time

import pytest

from tests.helpers.cluster import Traffic, create_topic, fresh, wait_for
from tests.helpers.group_history import (
    assigned_now,
    check_history,
    consumed_to,
    member_ids,
    membership_changes,
    read_events,
    wait_assigned,
    wait_consumed_past,
)
from tests.helpers.group_member import MemberProcess, MemberSpec
from tests.helpers.group_state import (
    committed_offsets,
    group_records,
    wait_committed_to_end,
)

pytestmark = pytest.mark.clients

PARTITIONS = 6


def test_members_killed_closing_and_joining_consume_everything_once(group_broker, tmp_path):
    bootstrap = group_broker.bootstrap
    topic, group = fresh("members"), fresh("group")
    create_topic(group_broker, topic, PARTITIONS, factor=1)

    def member(name: str, session_timeout_ms: int) -> MemberProcess:
        spec = MemberSpec(
            name, bootstrap, group, topic, tmp_path / f"{name}.events",
            session_timeout_ms=session_timeout_ms,
        )  # fmt: skip
        return MemberProcess(spec).start()

    # a is killed: its session (3 s) must end before its partitions move. b closes: its
    # session is longer than any wait here, so only its LeaveGroup can move its partitions.
    a, b, c = member("a", 3000), member("b", 120_000), member("c", 120_000)
    started = [a, b, c]
    try:
        with Traffic(bootstrap, topic, partitions=PARTITIONS, rate=300) as traffic:
            first = wait_assigned([a, b, c], PARTITIONS, "three members sharing the partitions")
            assert all(len(parts) == 2 for parts in first.values()), first
            traffic.wait_acked(600)
            wait_consumed_past([a], dict.fromkeys(first["a"], 20), "a consuming")

            a.kill()
            # Nobody owns a's partitions until its session ends: what the group committed
            # for them now is where the next owner must start.
            time.sleep(0.5)  # a commit a sent just before the kill may still land
            at_kill = committed_offsets(bootstrap, group)
            after_kill = wait_assigned([b, c], PARTITIONS, "b and c taking over a's partitions")
            wait_consumed_past([b, c], consumed_to([a]), "a's partitions read past a's reads")

            b.close()
            wait_assigned([c], PARTITIONS, "c alone after b left")

            d = member("d", 120_000)
            started.append(d)
            wait_assigned([c, d], PARTITIONS, "c and d sharing after d joined")
            traffic.wait_acked(len(traffic.acked) + 600)
        wait_committed_to_end(bootstrap, group, topic, PARTITIONS)
        c.close()
        d.close()
    finally:
        for m in started:
            m.stop_quietly()

    assert traffic.errors == []
    logs = {m.spec.name: read_events(m.spec.events) for m in started}
    duplicates = check_history(logs, set(traffic.positions), ended={"a": a.killed_at})

    # The at-least-once window, exactly: what a consumed after the offsets committed for
    # its partitions when it died was consumed again by their next owner, nothing else was.
    a_consumed = [(e["p"], e["o"]) for e in logs["a"] if e["ev"] == "consumed"]
    window = {(p, o) for p, o in a_consumed if o >= at_kill.get((topic, p), 0)}
    assert set(duplicates) == window
    for (p, _), who in duplicates.items():
        (next_owner,) = [m for m, parts in after_kill.items() if p in parts]
        assert who == ["a", next_owner]
    # a's last commit it saw succeed is at most what the group had (a commit may land
    # without its answer reaching a).
    for e in logs["a"]:
        if e["ev"] == "committed":
            for p, o in e["offsets"].items():
                assert o <= at_kill[(topic, int(p))]
    assert len(set(member_ids(logs["a"]))) == 1  # a stayed a member until it was killed


def test_a_static_member_restarted_within_its_session_rejoins_without_a_rebalance(
    group_broker, tmp_path
):
    bootstrap = group_broker.bootstrap
    topic, group = fresh("static"), fresh("static-group")
    create_topic(group_broker, topic, PARTITIONS, factor=1)

    def member(name: str, instance_id: str) -> MemberProcess:
        spec = MemberSpec(
            name, bootstrap, group, topic, tmp_path / f"{name}.events",
            session_timeout_ms=30_000, instance_id=instance_id,
        )  # fmt: skip
        return MemberProcess(spec).start()

    def latest_record() -> dict | None:
        records = group_records(bootstrap, group)
        return records[-1] if records and records[-1] and records[-1]["members"] else None

    one, two = member("one", "instance-1"), member("two", "instance-2")
    started = [one, two]
    try:
        with Traffic(bootstrap, topic, partitions=PARTITIONS, rate=200) as traffic:
            before = wait_assigned(
                [one, two], PARTITIONS, "two static members sharing the partitions"
            )
            record = wait_for(latest_record, "the group's record")
            # Members starting apart may need a second generation to meet: count from here.
            settled = len(read_events(two.spec.events))
            traffic.wait_acked(400)

            one.close()  # a static member does not leave the group: its session goes on
            again = member("one-again", "instance-1")
            started.append(again)
            wait_for(lambda: assigned_now(read_events(again.spec.events)), "one back")
            traffic.wait_acked(len(traffic.acked) + 400)
        wait_committed_to_end(bootstrap, group, topic, PARTITIONS)
        after = latest_record()
        again.close()
        two.close()
    finally:
        for m in started:
            m.stop_quietly()

    # The same generation; the new member id in place of the old; the same assignment.
    old = {m["group_instance_id"]: m for m in record["members"]}
    new = {m["group_instance_id"]: m for m in after["members"]}
    assert after["generation"] == record["generation"]
    (again_id,) = member_ids(read_events(again.spec.events))
    assert new["instance-1"]["member_id"] == again_id != old["instance-1"]["member_id"]
    assert new["instance-1"]["assignment"] == old["instance-1"]["assignment"]
    assert new["instance-2"] == old["instance-2"]
    logs = {m.spec.name: read_events(m.spec.events) for m in started}
    assert (
        set(next(e["partitions"] for e in logs["one-again"] if e["ev"] == "assign"))
        == (before["one"])
    )
    # two saw no rebalance: its assignment revoked only when it closed.
    assert membership_changes(logs["two"][settled:]) == ["revoke", "closed"]
    assert check_history(logs, set(traffic.positions), ended={}) == {}
