"""Which OffsetCommits a group takes, state by state (docs/contracts/consumer-groups.md,
"Offset commits, state by state"): the pure decision for every state and kind of
committer, then the same through the in-process broker's request handling (bytes in,
bytes out, a hand clock for sessions)."""

from __future__ import annotations

import pytest

from broker.coordinator.commit_rules import BY_STATE, Accept, decide_offset_commit
from broker.coordinator.group import Group, GroupState, Member
from broker.protocol.errors import ErrorCode as E
from tests.helpers.groups import (
    DELAY,
    commit,
    commit_errors,
    committed,
    describe,
    heartbeat,
    join,
    join_new,
    leave,
    stable_group,
    sync,
)

S = GroupState
GEN = 5
TAKEN = Accept(heartbeat=True)  # a member's commit: stored, and its session restarts
STANDALONE = Accept(heartbeat=False)  # no member to keep alive
RIP, ILLEGAL, UNKNOWN, FENCED = (
    E.REBALANCE_IN_PROGRESS,
    E.ILLEGAL_GENERATION,
    E.UNKNOWN_MEMBER_ID,
    E.FENCED_INSTANCE_ID,
)


def group_in(state: GroupState) -> Group:
    """A group in `state` at generation GEN: members "m" (dynamic) and "s" (static, instance
    "inst") unless Empty or Dead."""
    group = Group("g", state=state, generation_id=GEN)
    if state not in (S.EMPTY, S.DEAD):
        for member_id, instance in (("m", None), ("s", "inst")):
            group.add(
                Member(member_id, instance, "client", "/127.0.0.1", 30_000, 10_000,
                       "consumer", [("cooperative-sticky", b"")])
            )  # fmt: skip
    return group


# Kinds of commit: (generation, member id, group instance id).
COMMITS = {
    "current member": (GEN, "m", None),
    "current static member": (GEN, "s", "inst"),
    "previous generation": (GEN - 1, "m", None),
    "later generation": (GEN + 1, "m", None),
    "generation -1 naming a member": (-1, "m", None),
    "unknown member": (GEN, "ghost", None),
    "static id held by another member id": (GEN, "old-s", "inst"),
    "static id the group does not know": (GEN, "m", "other-inst"),
    "standalone (generation -1, no ids)": (-1, "", None),
    "standalone naming a stale member": (-1, "gone", "gone-inst"),
}

# The contract's table: commit kind -> answer per state.
#                                           Empty       Preparing  Completing Stable   Dead
EXPECTED = {
    "current member":                       (UNKNOWN,   TAKEN,     RIP,       TAKEN,   None),
    "current static member":                (UNKNOWN,   TAKEN,     RIP,       TAKEN,   None),
    "previous generation":                  (UNKNOWN,   ILLEGAL,   ILLEGAL,   ILLEGAL, None),
    "later generation":                     (UNKNOWN,   ILLEGAL,   ILLEGAL,   ILLEGAL, None),
    "generation -1 naming a member":        (STANDALONE, ILLEGAL,  ILLEGAL,   ILLEGAL, None),
    "unknown member":                       (UNKNOWN,   UNKNOWN,   UNKNOWN,   UNKNOWN, None),
    "static id held by another member id":  (UNKNOWN,   FENCED,    FENCED,    FENCED,  None),
    "static id the group does not know":    (UNKNOWN,   UNKNOWN,   UNKNOWN,   UNKNOWN, None),
    "standalone (generation -1, no ids)":   (STANDALONE, UNKNOWN,  UNKNOWN,   UNKNOWN, None),
    "standalone naming a stale member":     (STANDALONE, UNKNOWN,  UNKNOWN,   UNKNOWN, None),
}  # fmt: skip
STATES = (S.EMPTY, S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE, S.STABLE, S.DEAD)


@pytest.mark.parametrize("kind", list(COMMITS))
@pytest.mark.parametrize("state", STATES, ids=[s.value for s in STATES])
def test_each_state_answers_each_kind_of_commit_as_kafka(state, kind):
    expected = EXPECTED[kind][STATES.index(state)]
    if expected is None:  # Dead: nothing is taken, whoever commits
        expected = E.COORDINATOR_NOT_AVAILABLE
    assert decide_offset_commit(group_in(state), *COMMITS[kind]) == expected


def test_a_group_the_coordinator_does_not_have():
    assert decide_offset_commit(None, -1, "", None) == STANDALONE  # creates it, Empty
    assert decide_offset_commit(None, -1, "someone", "inst") == STANDALONE
    assert decide_offset_commit(None, 0, "", None) == ILLEGAL  # a generation of another time
    assert decide_offset_commit(None, GEN, "m", None) == ILLEGAL


def test_every_state_has_a_row():
    assert set(BY_STATE) == set(GroupState)


# -- through the broker's request handling ------------------------------------------------------


def test_members_commit_while_the_group_prepares_a_rebalance(broker):
    gen, (a, b), _ = stable_group(broker)
    newcomer = join_new(broker)  # held until a and b rejoin
    assert describe(broker, "g")["group_state"] == "PreparingRebalance"
    assert commit_errors(commit(broker, "g", {("t", 0): 10}, gen, a)) == {("t", 0): 0}
    assert commit_errors(commit(broker, "g", {("t", 1): 20}, gen, b)) == {("t", 1): 0}
    assert commit_errors(commit(broker, "g", {("t", 0): 99}, gen - 1, a)) == {("t", 0): ILLEGAL}
    assert committed(broker, "g", [("t", 0), ("t", 1)]) == {("t", 0): 10, ("t", 1): 20}
    assert heartbeat(broker, "g", gen, a) == RIP  # the heartbeat still says: rejoin
    rejoined = [join(broker, member_id=m) for m in (a, b)]
    assert all(x.result()["generation_id"] == gen + 1 for x in [*rejoined, newcomer])


def test_commits_keep_a_member_alive_while_it_has_not_rejoined_yet(broker):
    # b only commits (no heartbeats) for three times its session while the rebalance waits
    # for it: its commits restart its session each time, so it is still a member.
    gen, (a, b), leader = stable_group(broker, session_ms=5000)
    other = b if leader == a else a
    waiting = join(broker, member_id=leader, session_ms=5000)
    for offset in range(4):
        broker.advance(4000)
        assert commit_errors(commit(broker, "g", {("t", 0): offset}, gen, other)) == {("t", 0): 0}
    assert not waiting.done
    assert {m["member_id"] for m in describe(broker, "g")["members"]} == {a, b}
    assert join(broker, member_id=other, session_ms=5000).result()["generation_id"] == gen + 1
    assert waiting.result()["generation_id"] == gen + 1
    # Without commits or heartbeats it is removed once its session ends.
    broker.advance(6000)
    assert heartbeat(broker, "g", gen + 1, other) == UNKNOWN


def test_commits_while_the_group_completes_its_rebalance(broker):
    gen, (a, b), leader = stable_group(broker)
    follower = b if leader == a else a
    joins = [join(broker, member_id=m) for m in (a, b)]
    new_gen = joins[0].result()["generation_id"]
    assert describe(broker, "g")["group_state"] == "CompletingRebalance"
    # A commit sent before the member saw its JoinGroup answer (behind it on the same
    # connection) is of the previous generation: ILLEGAL_GENERATION, as Kafka answers.
    assert commit_errors(commit(broker, "g", {("t", 0): 5}, gen, follower)) == {("t", 0): ILLEGAL}
    assert commit_errors(commit(broker, "g", {("t", 0): 5}, new_gen, follower)) == {("t", 0): RIP}
    assert commit_errors(commit(broker, "g", {("t", 0): 5}, new_gen, "ghost")) == {
        ("t", 0): UNKNOWN
    }
    assert committed(broker, "g", [("t", 0)]) == {("t", 0): -1}  # none of them stored
    sync(broker, "g", new_gen, leader, {a: b"", b: b""}).result()
    assert commit_errors(commit(broker, "g", {("t", 0): 5}, new_gen, follower)) == {("t", 0): 0}


def test_static_members_commit_under_their_current_member_id_only(broker):
    first = join(broker, instance="i-a")
    broker.advance(DELAY)
    gen, old_id = first.result()["generation_id"], first.result()["member_id"]
    sync(broker, "g", gen, old_id, {old_id: b""}, instance="i-a").result()
    new_id = join(broker, instance="i-a").result()["member_id"]  # restarted: a new member id

    def answer(member_id, instance):
        return commit_errors(commit(broker, "g", {("t", 0): 1}, gen, member_id, instance=instance))

    assert answer(old_id, "i-a") == {("t", 0): FENCED}
    assert answer(new_id, "i-other") == {("t", 0): UNKNOWN}
    assert answer(new_id, "i-a") == {("t", 0): 0}


def test_an_emptied_group_takes_standalone_commits_only(broker):
    gen, (a,), _ = stable_group(broker, members=1)
    assert leave(broker, "g", a) == 0
    assert describe(broker, "g")["group_state"] == "Empty"
    assert commit_errors(commit(broker, "g", {("t", 0): 3}, gen, a)) == {("t", 0): UNKNOWN}
    assert commit_errors(commit(broker, "g", {("t", 0): 4}, -1, a)) == {("t", 0): 0}
    assert commit_errors(commit(broker, "g", {("t", 0): 5})) == {("t", 0): 0}
    assert committed(broker, "g", [("t", 0)]) == {("t", 0): 5}
    assert commit_errors(commit(broker, "other", {("t", 0): 1}, 3, "m")) == {("t", 0): ILLEGAL}
