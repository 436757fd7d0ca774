"""Bad group requests sent raw (`BrokerConnection`) to a broker process while a group of
confluent-kafka members consumes: each gets Kafka's error, and the group goes on without
a rebalance (tests/coordinator/ covers the same in process, on a hand clock)."""

from __future__ import annotations

import time

import pytest

from broker.protocol.apis import (
    HEARTBEAT,
    JOIN_GROUP,
    LEAVE_GROUP,
    OFFSET_COMMIT,
    SYNC_GROUP,
)
from broker.protocol.consumer_protocol import encode_assignment
from broker.protocol.errors import ErrorCode as E
from tests.helpers.cluster import Traffic, create_topic, fresh, wait_for
from tests.helpers.group_history import (
    check_history,
    membership_changes,
    read_events,
    wait_assigned,
)
from tests.helpers.group_member import MemberSpec, MemberThread
from tests.helpers.group_state import (
    connect,
    coordinator_of,
    group_records,
    wait_committed_to_end,
)
from tests.helpers.groups import (
    commit_body,
    heartbeat_body,
    join_body,
    leave_body,
    partition_errors,
    subscription,
    sync_body,
)

pytestmark = pytest.mark.clients

PARTITIONS = 4


def test_bad_requests_get_kafkas_errors_and_leave_a_consuming_group_alone(group_broker, tmp_path):
    bootstrap = group_broker.bootstrap
    topic, group = fresh("bad"), fresh("bad-group")
    create_topic(group_broker, topic, PARTITIONS, factor=1)
    members = [
        MemberThread(MemberSpec(name, bootstrap, group, topic, tmp_path / f"{name}.events"))
        for name in ("m1", "m2")
    ]
    for m in members:
        m.start()
    conn = connect(bootstrap, client_id="bad-requests")
    try:
        with Traffic(bootstrap, topic, partitions=PARTITIONS, rate=200) as traffic:

            def stable_record():
                records = group_records(bootstrap, group)
                last = records[-1] if records else None
                return last if last and len(last["members"]) == 2 else None

            wait_assigned(members, PARTITIONS, "two members sharing the partitions")
            record = wait_for(stable_record, "the group of two stable")
            # Members starting apart may need a second generation to meet: count from here.
            settled = {m.spec.name: len(read_events(m.spec.events)) for m in members}
            generation = record["generation"]
            real = record["members"][0]["member_id"]
            traffic.wait_acked(200)
            assert coordinator_of(bootstrap, group) == 0

            def join(**kw) -> int:
                return conn.request(JOIN_GROUP, join_body(group, **kw), 5)["error_code"]

            sub = subscription(topic)
            assert join(member_id="ghost", protocols=[("range", sub)]) == E.UNKNOWN_MEMBER_ID
            assert join(protocol_type="connect", protocols=[("range", sub)]) == (
                E.INCONSISTENT_GROUP_PROTOCOL
            )
            assert join(protocols=[("no-such-assignor", sub)]) == E.INCONSISTENT_GROUP_PROTOCOL
            # Larger than message.max.bytes (1 MB) once in the group's record.
            huge = [("range", sub + b"x" * 1_200_000)]
            assert join(protocols=huge) == E.MESSAGE_TOO_LARGE
            assert join(member_id=real, protocols=huge) == E.MESSAGE_TOO_LARGE

            def sync(gen: int, member: str) -> int:
                return conn.request(SYNC_GROUP, sync_body(group, gen, member), 3)["error_code"]

            assert sync(generation + 5, real) == E.ILLEGAL_GENERATION
            assert sync(generation, "ghost") == E.UNKNOWN_MEMBER_ID

            def heartbeat(gen: int, member: str, g: str = group) -> int:
                return conn.request(HEARTBEAT, heartbeat_body(g, gen, member), 3)["error_code"]

            assert heartbeat(generation - 1, real) == E.ILLEGAL_GENERATION
            assert heartbeat(generation, "ghost") == E.UNKNOWN_MEMBER_ID

            # A commit far ahead: were it taken, the group's offsets would end up past
            # the logs' ends (the final check).
            def commit(gen: int, member: str, g: str = group) -> set[int]:
                body = commit_body(g, {(topic, 0): 10**9}, gen, member)
                return set(partition_errors(conn.request(OFFSET_COMMIT, body, 7)).values())

            assert commit(generation - 1, real) == {E.ILLEGAL_GENERATION}
            assert commit(generation, "ghost") == {E.UNKNOWN_MEMBER_ID}

            # A member of a group of its own (raw requests) that left: its heartbeats and
            # commits are refused; the consuming group is not involved.
            solo = fresh("left")
            first = conn.request(JOIN_GROUP, join_body(solo, protocols=[("range", sub)]), 5)
            assert first["error_code"] == E.MEMBER_ID_REQUIRED
            joined = conn.request(
                JOIN_GROUP, join_body(solo, first["member_id"], protocols=[("range", sub)]), 5
            )
            assert joined["error_code"] == 0 and joined["leader"] == first["member_id"]
            me, gen = first["member_id"], joined["generation_id"]
            mine = {me: encode_assignment({"topic_partitions": [], "user_data": None})}
            synced = conn.request(SYNC_GROUP, sync_body(solo, gen, me, mine), 3)
            assert synced["error_code"] == 0
            assert heartbeat(gen, me, solo) == 0
            assert conn.request(LEAVE_GROUP, leave_body(solo, me), 1)["error_code"] == 0
            assert heartbeat(gen, me, solo) == E.UNKNOWN_MEMBER_ID
            assert commit(gen, me, solo) == {E.UNKNOWN_MEMBER_ID}

            traffic.wait_acked(len(traffic.acked) + 200)
        wait_committed_to_end(bootstrap, group, topic, PARTITIONS)
        assert stable_record()["generation"] == generation
        closing = time.monotonic()  # the first to close makes the other rebalance
    finally:
        conn.close()
        for m in members:
            m.close()

    logs = {m.spec.name: read_events(m.spec.events) for m in members}
    # No member's assignment changed until the members were closed: no rebalance.
    for name, events in logs.items():
        before_close = [e for e in events[settled[name] :] if e["t"] < closing]
        assert membership_changes(before_close) == [], name
    assert check_history(logs, set(traffic.positions), ended={}) == {}
