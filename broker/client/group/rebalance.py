"""The consumer's side of a rebalance (the GroupHooks of membership.py): what the member
sends in JoinGroup, the leader's assignment, and applying an assignment with the
application's rebalance callbacks, for the eager and the cooperative protocol.

- Before joining: commit consumed offsets (auto commit), then, eager: revoke every
  partition; cooperative: revoke only partitions of topics no longer subscribed. A
  member whose generation was reset has lost its partitions instead (on_partitions_lost;
  no commit, the group would refuse it).
- JoinGroup carries one subscription per configured assignor, in order of preference:
  the topics, the assignor's user data, the partitions owned now, the generation, the
  rack.
- The leader decodes every member's subscription, asks Metadata for all their topics and
  runs the assignor the coordinator chose. Members it leaves out get an empty
  assignment. Assignments are written at the lowest subscription version among the
  members, so every member can read them.
- After SyncGroup, eager: the assignment replaces everything; cooperative: partitions no
  longer assigned are revoked (and the member rejoins, so a second rebalance can hand
  them to their new owner), the added ones are assigned.

A member also rejoins when what the assignment was computed from changes: its own
pattern matches other topics, or the partition count of a topic it (as leader: anyone
in the group) subscribes to changes (checked on each metadata refresh).

Exceptions from the application's callbacks do not stop the rebalance: the first one is
raised from poll() once the member's state is consistent, as Kafka's client does.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from broker.client.cluster import ClusterMetadata
from broker.client.group.assignors import Assignor, RebalanceProtocol
from broker.client.group.consumer_protocol import (
    NEWEST_VERSION,
    PROTOCOL_TYPE,
    Assignment,
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from broker.client.group.membership import Generation, GroupMembership
from broker.client.group.subscription import SubscriptionState
from broker.cluster import TopicPartition
from broker.protocol.errors import ErrorCode, KafkaError
from broker.protocol.types import DecodeError

log = logging.getLogger(__name__)


class ConsumerRebalance:
    protocol_type = PROTOCOL_TYPE

    def __init__(
        self,
        subscription: SubscriptionState,
        assignors: list[Assignor],
        protocol: RebalanceProtocol,
        cluster: ClusterMetadata,
        rack: str | None,
        commit_before_rebalance: Callable[[], None],
    ):
        self.subscription = subscription
        self.assignors = {a.name: a for a in assignors}
        self.protocol = protocol
        self.cluster = cluster
        self.rack = rack
        self.commit_before_rebalance = commit_before_rebalance
        self.membership: GroupMembership | None = None  # set by the consumer
        self.listener_error: Exception | None = None
        # Partition counts the current assignment was computed from: the member's own
        # topics, and (leader only) every topic of the group.
        self.own_snapshot: dict[str, int] = {}
        self.group_snapshot: dict[str, int] | None = None

    # --- JoinGroup --------------------------------------------------------------------

    def join_protocols(self) -> list[dict]:
        topics = sorted(self.subscription.topics)
        generation = self.membership.generation.generation_id if self.membership else -1
        owned = sorted(self.subscription.assignment)
        return [
            {
                "name": name,
                "metadata": encode_subscription(
                    Subscription(
                        topics,
                        assignor.subscription_user_data(topics),
                        owned,
                        generation,
                        self.rack,
                    )
                ),
            }
            for name, assignor in self.assignors.items()
        ]

    def on_join_prepare(self, generation: Generation, lost: bool) -> None:
        owned = set(self.subscription.assignment)
        self.group_snapshot = None
        if lost:
            if owned:
                self.call_listener("on_partitions_lost", owned)
                self.subscription.set_assignment([])
            return
        try:
            self.commit_before_rebalance()
        except KafkaError as exc:
            log.warning("commit before the rebalance failed: %s", exc)
        if self.protocol == RebalanceProtocol.EAGER:
            revoked = owned
        else:
            revoked = {tp for tp in owned if tp.topic not in self.subscription.topics}
        if revoked:
            self.call_listener("on_partitions_revoked", revoked)
            self.subscription.set_assignment(owned - revoked)

    # --- the leader ---------------------------------------------------------------

    def perform_assignment(self, protocol: str, members: list[dict]) -> dict[str, bytes]:
        assignor = self.assignors.get(protocol)
        if assignor is None:
            raise KafkaError(
                f"the coordinator chose assignor {protocol!r}, which this member did not offer",
                ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
            )
        subscriptions: dict[str, Subscription] = {}
        for member in members:
            try:
                sub = decode_subscription(member["metadata"])
            except DecodeError as exc:
                log.warning(
                    "member %s sent an unreadable subscription (%s): it gets nothing",
                    member["member_id"],
                    exc,
                )
                sub = Subscription([], version=0)
            sub.member_id = member["member_id"]
            sub.group_instance_id = member["group_instance_id"]
            subscriptions[sub.member_id] = sub
        topics = sorted({t for s in subscriptions.values() for t in s.topics})
        counts = self._partition_counts(topics)
        result = assignor.assign({t: n for t, n in counts.items() if n}, subscriptions)
        self.group_snapshot = counts
        version = min([NEWEST_VERSION] + [s.version for s in subscriptions.values()])
        log.info("leader assigned with %s: %s", protocol, result)
        return {
            member: encode_assignment(Assignment(sorted(result.get(member, [])), None, version))
            for member in subscriptions
        }

    def _partition_counts(self, topics: list[str]) -> dict[str, int]:
        """topic -> partition count from fresh metadata (0: the topic does not exist)."""
        if topics:
            self.cluster.refresh(topics)
        return {
            t: len(self.cluster.topics[t].partitions) if t in self.cluster.topics else 0
            for t in topics
        }

    # --- after SyncGroup ----------------------------------------------------------

    def on_join_complete(self, generation: Generation, assignment_bytes: bytes) -> None:
        try:
            assignment = decode_assignment(assignment_bytes)
        except DecodeError as exc:
            log.warning("unreadable assignment from the leader (%s): rejoining", exc)
            self.membership.request_rejoin("unreadable assignment")
            return
        partitions = set(assignment.partitions)
        foreign = {tp for tp in partitions if tp.topic not in self.subscription.topics}
        if foreign:
            # The leader saw topics this member does not subscribe (to) yet, or no more.
            log.info("assigned partitions of topics not subscribed: %s; rejoining", sorted(foreign))
            partitions -= foreign
            self.membership.request_rejoin("assignment does not match the subscription")
        owned = set(self.subscription.assignment)
        if self.protocol == RebalanceProtocol.COOPERATIVE:
            revoked, added = owned - partitions, partitions - owned
            if revoked:
                self.call_listener("on_partitions_revoked", revoked)
                self.membership.request_rejoin(
                    "partitions revoked: a second rebalance hands them over"
                )
        else:
            added = partitions
        assignor = self.assignors.get(generation.protocol or "")
        if assignor is not None:
            assignor.on_assignment(
                Assignment(sorted(partitions), assignment.user_data, assignment.version),
                generation.generation_id,
            )
        self.subscription.set_assignment(partitions)
        self.own_snapshot = self._known_counts(self.subscription.topics)
        self.call_listener("on_partitions_assigned", added)

    # --- metadata changes -------------------------------------------------------------

    def _known_counts(self, topics) -> dict[str, int]:
        return {
            t: len(self.cluster.topics[t].partitions) if t in self.cluster.topics else 0
            for t in topics
        }

    def metadata_changed(self) -> str | None:
        """After a metadata refresh: why the assignment is out of date, or None."""
        if self.subscription.pattern is not None:
            matched = self.subscription.matching(self.cluster.topics)
            if matched != self.subscription.topics:
                self.subscription.topics = matched
                return f"the pattern now matches {sorted(matched)}"
        if not self.subscription.subscribed:
            return None
        own = self._known_counts(self.subscription.topics)
        if self.own_snapshot and own != self.own_snapshot:
            return f"partition counts changed: {self.own_snapshot} -> {own}"
        if self.group_snapshot is not None:
            group = self._known_counts(self.group_snapshot)
            if group != self.group_snapshot:
                return f"partition counts of the group's topics changed: {group}"
        return None

    def metadata_topics(self) -> list[str] | None:
        """The topics a refresh must cover (None: all, for a pattern)."""
        if self.subscription.pattern is not None:
            return None
        return sorted(set(self.subscription.topics) | set(self.group_snapshot or ()))

    # --- callbacks ----------------------------------------------------------------

    def call_listener(self, method: str, partitions: set[TopicPartition]) -> None:
        try:
            getattr(self.subscription.listener, method)(set(partitions))
        except Exception as exc:
            log.exception("rebalance listener %s failed", method)
            if self.listener_error is None:
                self.listener_error = exc

    def raise_listener_error(self) -> None:
        error, self.listener_error = self.listener_error, None
        if error is not None:
            raise error
