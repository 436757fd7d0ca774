"""The assignors without a broker: range and round-robin give Kafka's exact results (the
Java docs' examples, and kafka-python's assignors on random groups); sticky and
cooperative-sticky are valid, balanced and sticky over sequences of rebalances, and
cooperative-sticky never hands out a partition another member still owns."""

from __future__ import annotations

import random
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.coordinator.assignors.range import RangePartitionAssignor
from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
from kafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor
from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription as KpSubscription

from broker.client.group.assignors import (
    ASSIGNORS,
    RebalanceProtocol,
    make_assignors,
    rebalance_protocol,
)
from broker.client.group.assignors.sticky import encode_sticky_user_data
from broker.client.group.consumer_protocol import (
    Assignment,
    Subscription,
    decode_subscription,
    encode_subscription,
)
from broker.cluster import TopicPartition

TP = TopicPartition


def subs(members: dict[str, list[str]], instances: dict[str, str] | None = None):
    out = {}
    for member, topics in members.items():
        s = Subscription(list(topics), member_id=member)
        s.group_instance_id = (instances or {}).get(member)
        out[member] = s
    return out


def tps(spec: str) -> list[TopicPartition]:
    """ "t0p0 t1p1" -> [TP("t0", 0), TP("t1", 1)]"""
    out = []
    for item in spec.split():
        topic, partition = item.rsplit("p", 1)
        out.append(TP(topic, int(partition)))
    return out


# --- range and round-robin: exact results ------------------------------------------


def test_range_gives_the_first_members_one_more():
    result = ASSIGNORS["range"]().assign(
        {"t0": 3, "t1": 3}, subs({"C0": ["t0", "t1"], "C1": ["t0", "t1"]})
    )
    assert result == {"C0": tps("t0p0 t0p1 t1p0 t1p1"), "C1": tps("t0p2 t1p2")}


def test_range_orders_static_members_first_by_instance_id():
    members = subs({"a": ["t"], "b": ["t"], "c": ["t"]}, instances={"c": "i-1", "a": "i-2"})
    result = ASSIGNORS["range"]().assign({"t": 4}, members)
    assert result == {"c": tps("tp0 tp1"), "a": tps("tp2"), "b": tps("tp3")}


def test_roundrobin_java_docs_examples():
    same = subs({c: ["t0", "t1", "t2", "t3"] for c in ("C0", "C1", "C2")})
    result = ASSIGNORS["roundrobin"]().assign({"t0": 2, "t1": 2, "t2": 2, "t3": 2}, same)
    assert result == {
        "C0": tps("t0p0 t1p1 t3p0"),
        "C1": tps("t0p1 t2p0 t3p1"),
        "C2": tps("t1p0 t2p1"),
    }
    different = subs({"C0": ["t0"], "C1": ["t0", "t1"], "C2": ["t0", "t1", "t2"]})
    result = ASSIGNORS["roundrobin"]().assign({"t0": 1, "t1": 2, "t2": 3}, different)
    assert result == {"C0": tps("t0p0"), "C1": tps("t1p0"), "C2": tps("t1p1 t2p0 t2p1 t2p2")}


def test_topics_that_do_not_exist_get_nothing():
    for name in ASSIGNORS:
        result = ASSIGNORS[name]().assign({"t": 2}, subs({"a": ["t", "gone"], "b": ["gone"]}))
        assert sorted(result["a"] + result["b"]) == tps("tp0 tp1"), name
        assert result["b"] == [], name


@st.composite
def groups(draw, max_members=6):
    topics = {f"t{i}": draw(st.integers(1, 6)) for i in range(draw(st.integers(1, 4)))}
    members = {}
    instances = {}
    for i in range(draw(st.integers(1, max_members))):
        member = f"m-{draw(st.integers(0, 999)):03d}-{i}"
        members[member] = draw(st.lists(st.sampled_from(sorted(topics)), min_size=1, unique=True))
        if draw(st.booleans()):
            instances[member] = f"i-{draw(st.integers(0, 99))}-{i}"
    return topics, members, instances


def kafka_python_assign(assignor, topics, members, instances):
    cluster = SimpleNamespace(
        partitions_for_topic=lambda t: set(range(topics[t])) if t in topics else None
    )
    kp_members = [
        SimpleNamespace(
            member_id=m,
            group_instance_id=instances.get(m),
            metadata=KpSubscription(version=0, topics=ts, user_data=b""),
        )
        for m, ts in members.items()
    ]
    return {m: sorted(a.partitions()) for m, a in assignor.assign(cluster, kp_members).items()}


@pytest.mark.parametrize(
    "name, theirs", [("range", RangePartitionAssignor), ("roundrobin", RoundRobinPartitionAssignor)]
)
@settings(max_examples=150, deadline=None)
@given(group=groups())
def test_same_assignment_as_kafka_python(name, theirs, group):
    # Dynamic members only: kafka-python's range groups static and dynamic members with
    # an unsorted itertools.groupby, which drops members when the two interleave (Java
    # orders static members first, as test_range_orders_static_members_first... checks).
    # And equal subscriptions for roundrobin: kafka-python's fails with a KeyError when
    # they differ (its member-topic lookup is keyed by member id, queried by a pair).
    topics, members, _ = group
    if name == "roundrobin":
        members = {m: sorted(topics) for m in members}
    ours = ASSIGNORS[name]().assign(topics, subs(members))
    expected = kafka_python_assign(theirs, topics, members, {})
    for member in members:
        assert sorted(ours[member]) == expected.get(member, []), member


# --- sticky: validity, balance, stickiness ---------------------------------------------


def check_valid(result, topics, members):
    everything = sorted(
        TP(t, p)
        for t, n in topics.items()
        for p in range(n)
        if any(t in ts for ts in members.values())
    )
    assigned = sorted(tp for ps in result.values() for tp in ps)
    assert assigned == everything, "each partition exactly once"
    for member, ps in result.items():
        assert all(tp.topic in members[member] for tp in ps), f"{member} got unsubscribed topics"


def check_balanced(result, members):
    """Kafka's definition: sizes differ by at most one, or no partition of a member could
    move to an eligible member with two or more fewer."""
    sizes = {m: len(ps) for m, ps in result.items()}
    for member, ps in result.items():
        for tp in ps:
            for other in members:
                assert not (tp.topic in members[other] and sizes[other] < sizes[member] - 1), (
                    f"{tp} could move from {member} ({sizes[member]}) to {other} ({sizes[other]})"
                )


def sticky_round(name, topics, members, previous, generation, assignor_state):
    """One eager sticky rebalance as real members run it: each member's subscription
    carries its user data from its own assignor instance."""
    subscriptions = {}
    for member, member_topics in members.items():
        assignor = assignor_state.setdefault(member, ASSIGNORS[name]())
        sub = Subscription(
            member_topics,
            assignor.subscription_user_data(member_topics),
            previous.get(member, []) if name == "cooperative-sticky" else [],
            generation - 1 if member in previous else -1,
        )
        sub = decode_subscription(encode_subscription(sub))  # through the wire format
        sub.member_id = member
        subscriptions[member] = sub
    leader = assignor_state[sorted(members)[0]]
    result = leader.assign(topics, subscriptions)
    for member, ps in result.items():
        assignor_state[member].on_assignment(Assignment(ps), generation)
    return result, subscriptions


@settings(max_examples=100, deadline=None)
@given(
    partitions=st.integers(1, 24),
    steps=st.lists(st.tuples(st.booleans(), st.integers(0, 50)), min_size=1, max_size=8),
)
def test_sticky_moves_only_what_balance_requires(partitions, steps):
    topics = {"t": partitions, "u": max(1, partitions // 3)}
    members: dict[str, list[str]] = {"m0": ["t", "u"]}
    state: dict = {}
    previous: dict[str, list[TopicPartition]] = {}
    for generation, (join, which) in enumerate(steps, start=1):
        if join or len(members) == 1:
            members[f"m{len(members) + which}"] = ["t", "u"]
        else:
            members.pop(sorted(members)[which % len(members)])
        result, _ = sticky_round("sticky", topics, members, previous, generation, state)
        check_valid(result, topics, members)
        sizes = sorted(len(ps) for ps in result.values())
        assert sizes[-1] - sizes[0] <= 1
        total = sum(topics.values())
        floor, ceilings = divmod(total, len(members))
        survivors = [m for m in members if m in previous]
        kept = sum(len(set(result[m]) & set(previous[m])) for m in survivors)
        over = sum(1 for m in survivors if len(previous[m]) > floor)
        assert kept == sum(min(len(previous[m]), floor) for m in survivors) + min(ceilings, over)
        previous = {m: result[m] for m in members}


@settings(max_examples=100, deadline=None)
@given(group=groups(max_members=5), seed=st.integers(0, 1000))
def test_sticky_with_different_subscriptions_stays_valid_and_balanced(group, seed):
    topics, members, _ = group
    rnd = random.Random(seed)
    state: dict = {}
    previous: dict = {}
    for generation in range(1, 4):
        result, _ = sticky_round("sticky", topics, members, previous, generation, state)
        check_valid(result, topics, members)
        check_balanced(result, members)
        # Nobody joined or left: a second rebalance moves nothing.
        again, _ = sticky_round("sticky", topics, members, result, generation + 10, dict(state))
        assert {m: sorted(p) for m, p in again.items()} == {m: sorted(p) for m, p in result.items()}
        previous = result
        if len(members) > 1 and rnd.random() < 0.5:
            members = dict(members)
            members.pop(rnd.choice(sorted(members)))
            previous = {m: previous[m] for m in members}


def test_sticky_java_docs_example_2():
    topics = {"t0": 1, "t1": 2, "t2": 3}
    members = {"C0": ["t0"], "C1": ["t0", "t1"], "C2": ["t0", "t1", "t2"]}
    state: dict = {}
    first, _ = sticky_round("sticky", topics, members, {}, 1, state)
    assert first == {"C0": tps("t0p0"), "C1": tps("t1p0 t1p1"), "C2": tps("t2p0 t2p1 t2p2")}
    del members["C0"]
    second, _ = sticky_round("sticky", topics, members, first, 2, state)
    assert second == {"C1": tps("t0p0 t1p0 t1p1"), "C2": tps("t2p0 t2p1 t2p2")}


def test_highest_generation_wins_a_claim_and_equal_claims_cancel():
    topics = {"t": 2}
    assignor = ASSIGNORS["sticky"]()
    members = subs({"a": ["t"], "b": ["t"]})
    members["a"].user_data = encode_sticky_user_data(tps("tp0 tp1"), 3)
    members["b"].user_data = encode_sticky_user_data(tps("tp1"), 4)
    assert assignor.assign(topics, members) == {"a": tps("tp0"), "b": tps("tp1")}
    members["a"].user_data = encode_sticky_user_data(tps("tp0"), 4)
    members["b"].user_data = encode_sticky_user_data(tps("tp0"), 4)
    result = assignor.assign(topics, members)
    assert sorted(result["a"] + result["b"]) == tps("tp0 tp1")


# --- cooperative-sticky ------------------------------------------------------------


@settings(max_examples=100, deadline=None)
@given(group=groups(max_members=5), joins=st.integers(1, 3))
def test_cooperative_never_hands_out_a_partition_another_member_owns(group, joins):
    topics, members, _ = group
    members = dict(members)
    state: dict = {}
    owned: dict[str, list[TopicPartition]] = {}
    generation = 0
    for step in range(joins + 1):
        if step:
            members[f"new-{step}"] = sorted(topics)
        # Rebalance rounds until nothing is revoked (each round: revoke, then rejoin).
        for _ in range(4):
            generation += 1
            result, subscriptions = sticky_round(
                "cooperative-sticky", topics, members, owned, generation, state
            )
            for member, ps in result.items():
                for tp in ps:
                    others = [
                        m
                        for m, s in subscriptions.items()
                        if m != member and tp in s.owned_partitions
                    ]
                    assert not others, f"{tp} given to {member} while {others} still own it"
            revoked = any(set(owned.get(m, [])) - set(result[m]) for m in members)
            owned = {m: result[m] for m in members}
            if not revoked:
                break
        else:
            pytest.fail("cooperative rebalances did not settle")
        check_valid(owned, topics, members)
        check_balanced(owned, members)


def test_cooperative_reads_generation_from_user_data_of_older_subscriptions():
    assignor = ASSIGNORS["cooperative-sticky"]()
    a = Subscription(["t"], b"\x00\x00\x00\x05", tps("tp0 tp1"), version=1, member_id="a")
    b = Subscription(["t"], b"\x00\x00\x00\x02", tps("tp1"), version=1, member_id="b")
    # a's claim on tp1 (generation 5) beats b's (2); b's tp1 is revoked, not handed over yet.
    assert assignor.assign({"t": 2}, {"a": a, "b": b}) == {"a": tps("tp0"), "b": []}


def test_kafka_python_sticky_leader_assigns_our_members_and_we_stick_to_theirs():
    topics = {"t": 4}
    cluster = SimpleNamespace(
        topics=lambda: set(topics), partitions_for_topic=lambda t: set(range(topics[t]))
    )
    ours = {m: ASSIGNORS["sticky"]() for m in ("a", "b")}
    ours["a"].on_assignment(Assignment(tps("tp1 tp3")), 4)
    ours["b"].on_assignment(Assignment(tps("tp0 tp2")), 4)
    kp_members = [
        SimpleNamespace(
            member_id=m,
            group_instance_id=None,
            metadata=KpSubscription.decode(
                encode_subscription(Subscription(["t"], a.subscription_user_data(["t"]), version=0))
            ),
        )
        for m, a in ours.items()
    ]
    # kafka-python 3 reads sticky user data behind an int16 version, which Kafka's layout
    # (ours) does not have: it ignores our previous assignments, as Kafka's Java client
    # ignores kafka-python's. Its assignment is still a valid, balanced one.
    result = {
        m: a.partitions() for m, a in StickyPartitionAssignor().assign(cluster, kp_members).items()
    }
    check_valid(result, topics, {"a": ["t"], "b": ["t"]})
    assert sorted(len(ps) for ps in result.values()) == [2, 2]

    # We read both layouts, so kafka-python members' previous assignments stick.
    kp = StickyPartitionAssignor._metadata(["t"], tps("tp0 tp3"), generation=9)
    mine = decode_subscription(bytes(kp.encode()))
    mine.member_id = "x"
    other = Subscription(["t"], None, member_id="y")
    result = ASSIGNORS["sticky"]().assign(topics, {"x": mine, "y": other})
    assert result == {"x": tps("tp0 tp3"), "y": tps("tp1 tp2")}


# --- choosing assignors ------------------------------------------------------------


def test_rebalance_protocol_is_cooperative_only_when_every_assignor_supports_it():
    assert (
        rebalance_protocol(make_assignors(["cooperative-sticky"])) == RebalanceProtocol.COOPERATIVE
    )
    assert (
        rebalance_protocol(make_assignors(["range", "cooperative-sticky"]))
        == RebalanceProtocol.EAGER
    )
    with pytest.raises(ValueError, match="unknown assignor 'fair'"):
        make_assignors(["range", "fair"])
