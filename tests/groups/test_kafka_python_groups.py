"""kafka-python KafkaConsumer groups with each of its assignors against a broker process:
three members (each in its own thread: one thread polling several kafka-python consumers
loses join answers in the client), a balanced assignment, every record consumed once, and
the commits seen through kafka-python's admin client."""

from __future__ import annotations

import pytest

from tests.helpers.cluster import Traffic, create_topic, fresh, wait_for
from tests.helpers.group_history import check_history, owners, read_events
from tests.helpers.group_member import MemberSpec, MemberThread, run_kafka_python_member
from tests.helpers.group_state import wait_committed_to_end

pytestmark = pytest.mark.clients

PARTITIONS = 7  # three members: 3, 2 and 2 partitions when balanced


@pytest.mark.parametrize("assignor", ["range", "roundrobin", "sticky", "cooperative-sticky"])
def test_a_group_with_each_assignor(group_broker, tmp_path, assignor):
    from kafka.admin import KafkaAdminClient

    bootstrap = group_broker.bootstrap
    topic, group = fresh(f"kp-{assignor}"), fresh(f"kp-{assignor}")
    create_topic(group_broker, topic, PARTITIONS, factor=1)

    def member(name: str) -> MemberThread:
        events, extra = tmp_path / f"{name}.events", {"assignor": assignor}
        spec = MemberSpec(name, bootstrap, group, topic, events, extra=extra)
        return MemberThread(spec, run=run_kafka_python_member).start()

    members = [member(f"kp-{i}") for i in range(3)]
    try:

        def balanced():
            owned = owners(members)
            every = sorted(p for parts in owned.values() for p in parts)
            sizes = sorted(len(parts) for parts in owned.values())
            return owned if every == list(range(PARTITIONS)) and sizes == [2, 2, 3] else None

        wait_for(balanced, f"three members balanced by {assignor}")
        with Traffic(bootstrap, topic, partitions=PARTITIONS, rate=500) as traffic:
            traffic.wait_acked(700)
        ends = wait_committed_to_end(bootstrap, group, topic, PARTITIONS)
        # Still balanced: no member left or was dropped meanwhile.
        assert balanced()
    finally:
        for m in members:
            m.close()

    logs = {m.spec.name: read_events(m.spec.events) for m in members}
    assert check_history(logs, set(traffic.positions), ended={}) == {}
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        seen = admin.list_group_offsets(group)[group]
    finally:
        admin.close()
    assert {(tp.topic, tp.partition): o.offset for tp, o in seen.items()} == ends
