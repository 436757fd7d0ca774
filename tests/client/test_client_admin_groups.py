"""The admin client's group API against broker processes, with groups made by
confluent-kafka consumers: list (state filter), describe (members and their decoded
assignments), committed offsets, alter offsets (refused while the group has members),
delete groups and offsets; and the coordinator followed across a broker restart."""

from __future__ import annotations

import pytest

from broker.client.admin import AdminClient
from broker.protocol.errors import (
    ErrorCode,
    GroupIdNotFoundError,
    TopicErrors,
    UnknownMemberIdError,
)
from tests.helpers.group_clients import ConfluentGroup, fresh, topic_with_records

pytestmark = pytest.mark.clients

COUNTS = [4, 2, 3]


@pytest.fixture
def admin(group_broker):
    with AdminClient(group_broker.bootstrap) as client:
        yield client


def test_a_stable_group(admin, group_broker):
    topic = topic_with_records(group_broker.bootstrap, COUNTS)
    other = topic_with_records(group_broker.bootstrap, [1])
    group = fresh("admin-stable")
    with ConfluentGroup(group_broker.bootstrap, group, [topic], members=2) as members:
        members.consume({(topic, p): n for p, n in enumerate(COUNTS)})
        members.commit()

        listed = {g.group_id: g for g in admin.list_groups()}
        assert (listed[group].protocol_type, listed[group].state) == ("consumer", "Stable")
        assert group in {g.group_id for g in admin.list_groups(["Stable"])}
        assert group not in {g.group_id for g in admin.list_groups(["Empty"])}

        described = admin.describe_groups([group])[group]
        assert (described.state, described.protocol_type, described.protocol) == (
            "Stable",
            "consumer",
            "range",
        )
        assert described.coordinator.node_id == admin.coordinators.node(group)
        assert sorted(m.client_id for m in described.members) == ["member-0", "member-1"]
        assigned = sorted(tp for m in described.members for tp in m.assignment)
        assert assigned == [(topic, 0), (topic, 1), (topic, 2)]  # each partition once
        # Range over three partitions and two members: two, then one.
        assert sorted(len(m.assignment) for m in described.members) == [1, 2]

        everything = admin.list_group_offsets(group)
        assert {tp: o.offset for tp, o in everything.items()} == {
            (topic, p): n for p, n in enumerate(COUNTS)
        }
        # Asked for partitions: one the group never committed is left out.
        asked = admin.list_group_offsets(group, [(topic, 1), (other, 0)])
        assert {tp: o.offset for tp, o in asked.items()} == {(topic, 1): 2}

        with pytest.raises(UnknownMemberIdError, match="has active members"):
            admin.alter_group_offsets(group, {(topic, 0): 0})
        assert admin.delete_groups([group]) == {group: ErrorCode.NON_EMPTY_GROUP}
        with pytest.raises(TopicErrors) as refused:
            admin.delete_groups([group], raise_errors=True)
        assert refused.value.code == ErrorCode.NON_EMPTY_GROUP
        # The members consume the topic: its offsets stay; the other topic's had none.
        assert admin.delete_group_offsets(group, [(topic, 0)]) == {
            (topic, 0): ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
        }
        assert admin.list_group_offsets(group)[(topic, 0)].offset == COUNTS[0]

    # The members left: the group is Empty and an administrator may change its offsets.
    assert admin.describe_groups([group])[group].state == "Empty"
    assert admin.alter_group_offsets(group, {(topic, 0): 1}) == {(topic, 0): ErrorCode.NONE}
    assert admin.delete_group_offsets(group, [(topic, 0)]) == {(topic, 0): ErrorCode.NONE}
    assert sorted(admin.list_group_offsets(group)) == [(topic, 1), (topic, 2)]
    assert admin.delete_groups([group]) == {group: ErrorCode.NONE}
    assert admin.list_group_offsets(group) == {}


def test_groups_that_do_not_exist_and_commit_only_groups(admin, group_broker):
    topic = topic_with_records(group_broker.bootstrap, [3])
    group = fresh("admin-new")
    described = admin.describe_groups([group])[group]
    assert (described.state, described.members) == ("Dead", [])
    assert admin.list_group_offsets(group) == {}
    assert admin.delete_groups([group]) == {group: ErrorCode.GROUP_ID_NOT_FOUND}
    with pytest.raises(GroupIdNotFoundError):
        admin.delete_group_offsets(group, [(topic, 0)])

    # Offsets committed for a group nobody joined make a group without a protocol type,
    # as Kafka's consumers that assign partitions themselves do.
    outcome = admin.alter_group_offsets(group, {(topic, 0): 2, (topic, 5): 1})
    assert outcome == {(topic, 0): ErrorCode.NONE, (topic, 5): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    assert admin.last_errors == {(topic, 5): (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None)}
    with pytest.raises(TopicErrors, match=f"{topic}-5: UNKNOWN_TOPIC_OR_PARTITION"):
        admin.alter_group_offsets(group, {(topic, 5): 1}, raise_errors=True)
    listed = {g.group_id: g for g in admin.list_groups()}
    assert (listed[group].protocol_type, listed[group].state) == ("", "Empty")
    assert admin.list_group_offsets(group)[(topic, 0)].offset == 2


def test_the_coordinator_is_found_again_after_a_broker_restart(broker_factory):
    """After a restart the connection is gone and the coordinator reloads the group from
    __consumer_offsets; the same client retries until it answers."""
    b = broker_factory()
    topic = topic_with_records(b.bootstrap, [5, 5])
    group = fresh("admin-restart")
    with AdminClient(b.bootstrap, request_timeout_ms=30000) as admin:
        admin.alter_group_offsets(group, {(topic, 0): 3, (topic, 1): 4}, raise_errors=True)
        b.stop()
        b.start()
        offsets = admin.list_group_offsets(group)
        assert {tp: o.offset for tp, o in offsets.items()} == {(topic, 0): 3, (topic, 1): 4}
        assert admin.describe_groups([group])[group].state == "Empty"
