"""Members of one consumer group run by different clients (ours, kafka-python,
confluent-kafka), each on a thread of its own, watched by one `GroupWatch`.

Every member consumes, commits synchronously after each poll, and reports through its
client's rebalance callbacks which partitions it gains and gives up. The watch keeps
the owner of each partition as those callbacks say and records:
- a partition gained while another member still owns it (`overlaps`),
- a record consumed from a partition the member does not own (`strays`),
- every record consumed, by whom.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict

from broker.client.group import GroupConsumer, RebalanceListener, TopicPartition

# Short timers so the mock cluster's rebalances take seconds, not tens of seconds.
SESSION_TIMEOUT_MS = 3000
HEARTBEAT_INTERVAL_MS = 300


class GroupWatch:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.owner: dict[TopicPartition, str] = {}
        self.overlaps: list[str] = []
        self.strays: list[str] = []
        self.consumed: dict[tuple[str, int, int], list[str]] = defaultdict(list)
        self.errors: list[str] = []
        # Records whose commit the group refused because it was rebalancing (Kafka's
        # CommitFailedException: legal; the next owner may consume them again).
        self.refused: set[tuple[str, int, int]] = set()

    def commit_refused(self, member: str, keys, exc: Exception) -> None:
        with self.lock:
            self.refused.update(keys)

    def gained(self, member: str, partitions) -> None:
        with self.lock:
            for tp in map(_tp, partitions):
                holder = self.owner.get(tp)
                if holder is not None and holder != member:
                    self.overlaps.append(f"{member} gained {tp} while {holder} owns it")
                self.owner[tp] = member

    def released(self, member: str, partitions) -> None:
        with self.lock:
            for tp in map(_tp, partitions):
                if self.owner.get(tp) == member:
                    del self.owner[tp]

    def record(self, member: str, topic: str, partition: int, offset: int) -> None:
        with self.lock:
            if self.owner.get(TopicPartition(topic, partition)) != member:
                self.strays.append(
                    f"{member} consumed {topic}-{partition}@{offset} it does not own"
                )
            self.consumed[(topic, partition, offset)].append(member)

    def owned_by(self) -> dict[str, set[TopicPartition]]:
        with self.lock:
            out: dict[str, set[TopicPartition]] = defaultdict(set)
            for tp, member in self.owner.items():
                out[member].add(tp)
            return dict(out)

    def wait_stable(self, members: list[Member], partitions: set[TopicPartition], timeout_s=60.0):
        """Until every partition is owned by one of `members`, each of which owns some
        when there are enough partitions, and it stays so for a second."""
        deadline = time.monotonic() + timeout_s
        since = None
        while time.monotonic() < deadline:
            owned = self.owned_by()
            names = {m.name for m in members}
            ok = (set().union(*owned.values()) == partitions if owned else not partitions) and set(
                owned
            ) <= names
            if ok and len(partitions) >= len(members):
                ok = set(owned) == names
            if ok:
                since = since or time.monotonic()
                if time.monotonic() - since >= 1.0:
                    return owned
            else:
                since = None
            self.raise_errors()
            time.sleep(0.1)
        raise AssertionError(f"group not stable after {timeout_s}s: {self.owned_by()}")

    def wait_consumed(self, expected: set[tuple[str, int, int]], timeout_s=60.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with self.lock:
                missing = expected - set(self.consumed)
            if not missing:
                return
            self.raise_errors()
            time.sleep(0.1)
        raise AssertionError(f"{len(missing)} records never consumed, e.g. {sorted(missing)[:5]}")

    def raise_errors(self) -> None:
        with self.lock:
            if self.errors:
                raise AssertionError("member failed: " + "; ".join(self.errors))


def _tp(tp) -> TopicPartition:
    if isinstance(tp, tuple):
        return TopicPartition(tp[0], tp[1])
    return TopicPartition(tp.topic, tp.partition)  # kafka-python / confluent objects


class Member:
    """A member on a thread of its own: start(), then stop() (a clean close)."""

    kind = "?"

    def __init__(
        self,
        name: str,
        watch: GroupWatch,
        bootstrap: str,
        group: str,
        topic: str,
        assignor: str,
        **extra,
    ):
        self.name = name
        self.watch = watch
        self.bootstrap = bootstrap
        self.group = group
        self.topic = topic
        self.assignor = assignor
        self.extra = extra
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> Member:
        self._thread.start()
        return self

    def stop(self, timeout_s: float = 30.0) -> None:
        self._stop.set()
        self._thread.join(timeout_s)
        assert not self._thread.is_alive(), f"{self.name} did not stop"

    def _run(self) -> None:
        try:
            consumer = self.open()
            try:
                while not self._stop.is_set():
                    self.poll_once(consumer)
            finally:
                self.close(consumer)
        except Exception as exc:  # reported to the test through the watch
            with self.watch.lock:
                self.watch.errors.append(f"{self.name} ({self.kind}): {exc!r}")

    def open(self):
        raise NotImplementedError

    def poll_once(self, consumer) -> None:
        raise NotImplementedError

    def close(self, consumer) -> None:
        consumer.close()

    def commit(self, commit, keys) -> None:
        """Commit what was consumed; a commit the group refuses because it is
        rebalancing is legal (the member rejoins on its next poll): noted, not a failure."""
        try:
            commit()
        except Exception as exc:
            if not _rebalancing(exc):
                raise
            self.watch.commit_refused(self.name, keys, exc)


class _Listener(RebalanceListener):
    def __init__(self, member: Member):
        self.member = member

    def on_partitions_assigned(self, partitions):
        self.member.watch.gained(self.member.name, partitions)

    def on_partitions_revoked(self, partitions):
        self.member.watch.released(self.member.name, partitions)

    def on_partitions_lost(self, partitions):
        self.member.watch.released(self.member.name, partitions)


class OurMember(Member):
    kind = "ours"

    def open(self):
        consumer = GroupConsumer(
            self.bootstrap,
            group_id=self.group,
            client_id=self.name,
            partition_assignment_strategy=[self.assignor],
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            session_timeout_ms=SESSION_TIMEOUT_MS,
            heartbeat_interval_ms=HEARTBEAT_INTERVAL_MS,
            **self.extra,
        )
        consumer.subscribe([self.topic], listener=_Listener(self))
        return consumer

    def poll_once(self, consumer) -> None:
        records = consumer.poll(0.2)
        for r in records:
            self.watch.record(self.name, r.topic, r.partition, r.offset)
        if records:
            self.commit(consumer.commit, [(r.topic, r.partition, r.offset) for r in records])


class KafkaPythonMember(Member):
    kind = "kafka-python"

    def open(self):
        from kafka import KafkaConsumer
        from kafka.consumer.subscription_state import ConsumerRebalanceListener
        from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
        from kafka.coordinator.assignors.range import RangePartitionAssignor
        from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
        from kafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor

        assignor = {
            "range": RangePartitionAssignor,
            "roundrobin": RoundRobinPartitionAssignor,
            "sticky": StickyPartitionAssignor,
            "cooperative-sticky": CooperativeStickyAssignor,
        }[self.assignor]
        member = self

        class Listener(ConsumerRebalanceListener):
            def on_partitions_assigned(self, assigned):
                member.watch.gained(member.name, assigned)

            def on_partitions_revoked(self, revoked):
                member.watch.released(member.name, revoked)

            def on_partitions_lost(self, lost):
                member.watch.released(member.name, lost)

        consumer = KafkaConsumer(
            bootstrap_servers=self.bootstrap,
            group_id=self.group,
            client_id=self.name,
            partition_assignment_strategy=[assignor],
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            session_timeout_ms=SESSION_TIMEOUT_MS,
            heartbeat_interval_ms=HEARTBEAT_INTERVAL_MS,
            **self.extra,
        )
        # kafka-python leading with no metadata of the topic yet assigns nothing ("No
        # partition metadata") and waits for a metadata refresh to rejoin: on a loaded
        # machine that outlasts the test. Ask for the topic's partitions first.
        consumer.partitions_for_topic(self.topic)
        consumer.subscribe([self.topic], listener=Listener())
        return consumer

    def poll_once(self, consumer) -> None:
        batches = consumer.poll(timeout_ms=200)
        for tp, records in batches.items():
            for r in records:
                self.watch.record(self.name, tp.topic, tp.partition, r.offset)
        if batches:
            keys = [(tp.topic, tp.partition, r.offset) for tp, rs in batches.items() for r in rs]
            self.commit(consumer.commit, keys)


class ConfluentMember(Member):
    kind = "confluent-kafka"

    def open(self):
        from confluent_kafka import Consumer

        consumer = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": self.group,
                "client.id": self.name,
                "partition.assignment.strategy": self.assignor,
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "session.timeout.ms": SESSION_TIMEOUT_MS,
                "heartbeat.interval.ms": HEARTBEAT_INTERVAL_MS,
                **self.extra,
            }
        )
        member = self
        consumer.subscribe(
            [self.topic],
            on_assign=lambda c, ps: member.watch.gained(member.name, ps),
            on_revoke=lambda c, ps: member.watch.released(member.name, ps),
            on_lost=lambda c, ps: member.watch.released(member.name, ps),
        )
        return consumer

    def poll_once(self, consumer) -> None:
        msg = consumer.poll(0.2)
        if msg is None:
            return
        if msg.error():
            raise RuntimeError(str(msg.error()))
        self.watch.record(self.name, msg.topic(), msg.partition(), msg.offset())
        self.commit(
            lambda: consumer.commit(message=msg, asynchronous=False),
            [(msg.topic(), msg.partition(), msg.offset())],
        )


# What each client raises when the group refuses a commit because it is rebalancing or
# has moved on without the member (Kafka's CommitFailedException and its causes).
_REBALANCING = (
    "CommitFailed",
    "RebalanceInProgress",
    "IllegalGeneration",
    "UnknownMemberId",
    "REBALANCE_IN_PROGRESS",
    "ILLEGAL_GENERATION",
    "UNKNOWN_MEMBER_ID",
    "FENCED_INSTANCE_ID",
)


def _rebalancing(exc: Exception) -> bool:
    text = f"{type(exc).__name__} {exc!r}"
    return any(name in text for name in _REBALANCING)


MEMBER_KINDS = {"ours": OurMember, "kafka-python": KafkaPythonMember, "confluent": ConfluentMember}
