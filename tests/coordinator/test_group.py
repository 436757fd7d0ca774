"""The group's state table and protocol choice, without any I/O."""

from __future__ import annotations

import pytest

from broker.coordinator.group import (
    TRANSITIONS,
    Group,
    GroupState,
    IllegalStateTransition,
    Member,
)
from tests.helpers.groups import subscription

S = GroupState
ALLOWED = {
    (S.EMPTY, S.PREPARING_REBALANCE),
    (S.STABLE, S.PREPARING_REBALANCE),
    (S.COMPLETING_REBALANCE, S.PREPARING_REBALANCE),
    (S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE),
    (S.COMPLETING_REBALANCE, S.STABLE),
    (S.PREPARING_REBALANCE, S.EMPTY),
} | {(s, S.DEAD) for s in S}


@pytest.mark.parametrize("source", list(S))
@pytest.mark.parametrize("target", list(S))
def test_transitions_are_kafkas(source, target):
    group = Group("g", state=source)
    if (source, target) in ALLOWED:
        group.transition(target, 5)
        assert (group.state, group.state_timestamp_ms) == (target, 5)
    else:
        with pytest.raises(IllegalStateTransition):
            group.transition(target, 5)
        assert group.state is source
    assert set(TRANSITIONS) == set(S)


def member(member_id: str, *protocols: str, instance: str | None = None) -> Member:
    return Member(
        member_id, instance, "c", "/h", 1000, 1000, "consumer", [(p, b"") for p in protocols]
    )


def test_protocol_choice_by_votes_among_common_protocols():
    group = Group("g")
    group.add(member("a", "sticky", "range", "roundrobin"))
    group.add(member("b", "roundrobin", "range"))
    group.add(member("c", "range", "roundrobin"))
    assert group.candidate_protocols() == {"range", "roundrobin"}
    assert group.select_protocol() == "range"  # a and c vote range, b roundrobin
    assert group.supports("consumer", [("roundrobin", b"")])
    assert not group.supports("consumer", [("sticky", b"")])
    assert not group.supports("connect", [("range", b"")])


def test_the_leader_moves_when_it_leaves_and_static_ids_follow_members():
    group = Group("g")
    group.add(member("a", "range"))
    group.add(member("b", "range", instance="i-b"))
    assert group.leader_id == "a"
    group.remove("a")
    assert group.leader_id == "b"
    group.replace_static_member("i-b", "b", "b2")
    assert group.leader_id == "b2" and group.static_members == {"i-b": "b2"}
    assert group.is_static_member_fenced("b", "i-b")
    assert not group.is_static_member_fenced("b2", "i-b")


def test_subscribed_topics_read_from_consumer_subscriptions():
    group = Group("g", protocol_type="consumer", protocol_name="range")
    group.members["a"] = Member(
        "a", None, "c", "h", 1, 1, "consumer", [("range", subscription("t", "u"))]
    )
    group.members["b"] = Member(
        "b", None, "c", "h", 1, 1, "consumer", [("range", subscription("v"))]
    )
    assert group.subscribed_topics() == {"t", "u", "v"}
    group.members["b"].protocols = [("range", b"\x00")]  # does not decode: unknown
    assert group.subscribed_topics() is None
