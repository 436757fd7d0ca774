"""Kafka's "sticky" (KIP-54, eager) and "cooperative-sticky" (KIP-429) assignors.

Both compute the same kind of assignment: as balanced as the subscriptions allow (member
sizes differ by at most one, or no partition of a member could go to an eligible member
with two or more fewer), and within that, as many partitions as possible stay with the
member that owned them. They differ in where a member's previous partitions come from
and in what the leader hands out:

- "sticky" is eager: members give up everything before rejoining, so each puts its
  previous assignment and generation in its subscription's user data (Kafka's layout,
  `STICKY_USER_DATA`, no version prefix: previous_assignment, then generation since
  version 1; readers try version 1, then 0, then ignore it);
- "cooperative-sticky" members keep their partitions across the rebalance and list them
  in the subscription's owned_partitions, with the generation in generation_id (v2+)
  or, from older writers, as an int32 in the user data. A partition that moves is left
  out of everyone's assignment this round; its owner revokes it and rejoins, and the
  next rebalance gives it to its new owner. So no partition ever has two owners.

When several members claim a partition, the claim of the highest generation wins; two
claims at the same generation cancel out (the partition is reassigned).

The algorithm is ours, written from the KIPs' goals: keep the valid claims; when every
member subscribes to the same topics, quotas (each member gets the floor or the ceiling
of partitions/members, claims beyond the quota are released); otherwise unowned
partitions go to the least loaded eligible member (partitions with the fewest eligible
members first), then partitions move from a member to an eligible one with at least two
fewer until none can (each move lowers the sum of squared loads, so this ends).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from typing import NamedTuple

from broker.client.group.assignors.base import (
    Assignor,
    RebalanceProtocol,
    member_order,
    subscribed_partitions,
)
from broker.client.group.consumer_protocol import (
    Assignment,
    Subscription,
    flatten,
    group_by_topic,
)
from broker.cluster import TopicPartition
from broker.protocol.codec import compile_struct
from broker.protocol.types import INT32, STRING, Array, DecodeError, Reader, Struct, Writer
from broker.protocol.types import Field as F

DEFAULT_GENERATION = -1

# The eager sticky assignor's user data (no version prefix; version 1 is always written).
STICKY_USER_DATA = Struct(
    F("previous_assignment", Array(Struct(F("topic", STRING), F("partitions", Array(INT32))))),
    F("generation", INT32, "1+", default=DEFAULT_GENERATION),
)
_GENERATION = struct.Struct(">i")


class MemberData(NamedTuple):
    owned: list[TopicPartition]
    generation: int


def encode_sticky_user_data(partitions: list[TopicPartition], generation: int) -> bytes:
    w = Writer()
    body = {"previous_assignment": group_by_topic(partitions), "generation": generation}
    compile_struct(STICKY_USER_DATA, 1, False).encode(w, body)
    return w.getvalue()


def decode_sticky_user_data(data: bytes | None) -> MemberData:
    """Kafka's layout, version 1 then 0. kafka-python 3 writes the same struct behind an
    int16 version (which Kafka's readers cannot parse, so they ignore it): read as a last
    resort, so its members' previous assignments still count."""
    if not data:
        return MemberData([], DEFAULT_GENERATION)
    for prefixed, version in ((False, 1), (False, 0), (True, 1), (True, 0)):
        try:
            r = Reader(data)
            if prefixed and r.int16() != version:
                continue
            body = compile_struct(STICKY_USER_DATA, version, False).decode(r)
        except DecodeError:
            continue
        return MemberData(flatten(body["previous_assignment"]), body["generation"])
    return MemberData([], DEFAULT_GENERATION)  # unreadable: as if it owned nothing


class StickyAssignor(Assignor):
    name = "sticky"

    def __init__(self) -> None:
        self._previous: list[TopicPartition] | None = None
        self._generation = DEFAULT_GENERATION

    def subscription_user_data(self, topics: Iterable[str]) -> bytes | None:
        if self._previous is None:
            return None  # never assigned: nothing to stick to (as Kafka's)
        return encode_sticky_user_data(self._previous, self._generation)

    def on_assignment(self, assignment: Assignment, generation: int) -> None:
        self._previous = list(assignment.partitions)
        self._generation = generation

    def assign(
        self, partitions_per_topic: dict[str, int], subscriptions: dict[str, Subscription]
    ) -> dict[str, list[TopicPartition]]:
        data = {m: decode_sticky_user_data(s.user_data) for m, s in subscriptions.items()}
        return sticky_assign(partitions_per_topic, subscriptions, data)


class CooperativeStickyAssignor(Assignor):
    name = "cooperative-sticky"
    supported_protocols = (RebalanceProtocol.COOPERATIVE, RebalanceProtocol.EAGER)

    def __init__(self) -> None:
        self._generation = DEFAULT_GENERATION

    def subscription_user_data(self, topics: Iterable[str]) -> bytes | None:
        return _GENERATION.pack(self._generation)

    def on_assignment(self, assignment: Assignment, generation: int) -> None:
        self._generation = generation

    def assign(
        self, partitions_per_topic: dict[str, int], subscriptions: dict[str, Subscription]
    ) -> dict[str, list[TopicPartition]]:
        data = {m: cooperative_member_data(s) for m, s in subscriptions.items()}
        result = sticky_assign(partitions_per_topic, subscriptions, data)
        return without_transfers(result, subscriptions)


def cooperative_member_data(sub: Subscription) -> MemberData:
    if sub.version >= 2:
        return MemberData(list(sub.owned_partitions), sub.generation_id)
    generation = DEFAULT_GENERATION
    if sub.user_data is not None and len(sub.user_data) >= _GENERATION.size:
        (generation,) = _GENERATION.unpack_from(sub.user_data)
    return MemberData(list(sub.owned_partitions), generation)


def without_transfers(
    assignments: dict[str, list[TopicPartition]], subscriptions: dict[str, Subscription]
) -> dict[str, list[TopicPartition]]:
    """The cooperative rule: a partition that another member still lists as owned stays
    unassigned this round; that member revokes it, and the next rebalance hands it over.
    (Also when the other claim lost on generation: a stale owner may still be fetching.)"""
    claims: dict[TopicPartition, set[str]] = {}
    for member, sub in subscriptions.items():
        for tp in sub.owned_partitions:
            claims.setdefault(tp, set()).add(member)
    return {
        member: [tp for tp in partitions if not claims.get(tp, set()) - {member}]
        for member, partitions in assignments.items()
    }


def sticky_assign(
    partitions_per_topic: dict[str, int],
    subscriptions: dict[str, Subscription],
    member_data: dict[str, MemberData],
) -> dict[str, list[TopicPartition]]:
    """The balanced, sticky assignment of the module docstring: member id -> partitions."""
    order = member_order(subscriptions)
    if not order:
        return {}
    topics_of = {m: set(subscriptions[m].topics) & partitions_per_topic.keys() for m in order}
    every = subscribed_partitions(partitions_per_topic, subscriptions)
    kept: dict[str, list[TopicPartition]] = {m: [] for m in order}
    for tp, member in _valid_claims(order, topics_of, partitions_per_topic, member_data).items():
        kept[member].append(tp)
    for partitions in kept.values():
        partitions.sort()
    if all(topics_of[m] == topics_of[order[0]] for m in order):
        return _by_quota(order, kept, every)
    return _balanced(order, kept, every, topics_of)


def _valid_claims(order, topics_of, partitions_per_topic, member_data) -> dict:
    """partition -> the member whose claim stands: the only claim of the highest generation
    for a partition that exists and that the member still subscribes to."""
    best: dict[TopicPartition, tuple[int, list[str]]] = {}
    for member in order:
        data = member_data[member]
        for tp in dict.fromkeys(data.owned):
            if (
                tp.topic not in topics_of[member]
                or not 0 <= tp.partition < partitions_per_topic[tp.topic]
            ):
                continue
            claim = best.get(tp)
            if claim is None or data.generation > claim[0]:
                best[tp] = (data.generation, [member])
            elif data.generation == claim[0]:
                claim[1].append(member)
    return {tp: members[0] for tp, (_, members) in best.items() if len(members) == 1}


def _by_quota(order, kept, every) -> dict[str, list[TopicPartition]]:
    """Every member subscribes to the same topics: each ends with floor or ceiling of
    partitions/members; claims are kept up to that quota, the rest dealt round robin."""
    minimum, ceilings = divmod(len(every), len(order))
    result: dict[str, list[TopicPartition]] = {}
    # Members holding the most get the ceiling slots first: fewest partitions move.
    for member in sorted(order, key=lambda m: -len(kept[m])):
        own = kept[member]
        quota = minimum
        if len(own) > minimum and ceilings > 0:
            quota, ceilings = minimum + 1, ceilings - 1
        result[member] = own[:quota]
    taken = {tp for partitions in result.values() for tp in partitions}
    free = iter([tp for tp in every if tp not in taken])
    needy = [m for m in order if len(result[m]) < minimum]
    while needy:
        for member in list(needy):
            result[member].append(next(free))
            if len(result[member]) == minimum:
                needy.remove(member)
    for member in order:
        if ceilings == 0:
            break
        if len(result[member]) == minimum:
            result[member].append(next(free))
            ceilings -= 1
    return {m: result[m] for m in order}


def _balanced(order, kept, every, topics_of) -> dict[str, list[TopicPartition]]:
    """Members subscribe to different topics: greedy placement, then balancing moves."""
    rank = {m: i for i, m in enumerate(order)}
    eligible = {tp: [m for m in order if tp.topic in topics_of[m]] for tp in every}
    result = {m: list(kept[m]) for m in order}
    load = {m: len(result[m]) for m in order}
    taken = {tp for partitions in result.values() for tp in partitions}
    fresh = sorted((tp for tp in every if tp not in taken), key=lambda tp: (len(eligible[tp]), tp))
    for tp in fresh:
        member = min(eligible[tp], key=lambda m: (load[m], rank[m]))
        result[member].append(tp)
        load[member] += 1
    unclaimed = set(fresh)
    while (move := _next_move(order, rank, result, load, eligible, unclaimed)) is not None:
        donor, tp, taker = move
        result[donor].remove(tp)
        result[taker].append(tp)
        load[donor] -= 1
        load[taker] += 1
    return {m: sorted(result[m]) for m in order}


def _next_move(order, rank, result, load, eligible, unclaimed):
    """(donor, partition, taker) where taker has at least two fewer partitions than donor,
    from the most loaded donor; partitions nobody kept move first. None: balanced."""
    lightest = min(load.values())
    for donor in sorted(order, key=lambda m: (-load[m], rank[m])):
        if load[donor] <= lightest + 1:
            return None
        mine = sorted(result[donor], reverse=True)
        for tp in [tp for tp in mine if tp in unclaimed] + [
            tp for tp in mine if tp not in unclaimed
        ]:
            takers = [m for m in eligible[tp] if load[m] < load[donor] - 1]
            if takers:
                return donor, tp, min(takers, key=lambda m: (load[m], rank[m]))
    return None
