"""librdkafka (confluent-kafka) cooperative-sticky consumers committing through a
rebalance (docs/contracts/consumer-groups.md, "Offset commits, state by state"): a first
member consumes; a second joins; the first gives up half its partitions in two
incremental rebalances, committing from its revocation callback, by hand
(`commit(asynchronous=False)`) or by librdkafka's auto-commit, which commits what it
revokes. No REBALANCE_IN_PROGRESS reaches either application, the revocations' commits
land, and every record is consumed exactly once between the two."""

from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import dataclass, field

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer

from tests.helpers.cluster import create_topic, fresh, wait_for
from tests.helpers.group_state import committed_offsets

pytestmark = pytest.mark.clients

PARTITIONS = 4
PER_PARTITION = 150


@dataclass
class Seen:
    """What one consumer's application saw."""

    records: list[tuple[int, int]] = field(default_factory=list)  # (partition, offset)
    commits: list[dict[int, int]] = field(default_factory=list)  # each one that succeeded
    # Where the consumer stood on the partitions it was giving up, at each revocation.
    positions_at_revoke: list[dict[int, int]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # every error the application saw
    commit_error_codes: list[int] = field(default_factory=list)


def _consume(bootstrap, group, topic, mode, commit_every, seen: Seen, stop: threading.Event):
    manual = mode == "manual"
    next_offset: dict[int, int] = {}

    def on_commit(err, partitions) -> None:
        errors = [err] + [tp.error for tp in partitions]
        for e in errors:
            if e is not None:
                seen.errors.append(f"commit: {e}")
                seen.commit_error_codes.append(e.code())
        if err is None:
            seen.commits.append({tp.partition: tp.offset for tp in partitions if not tp.error})

    consumer = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "partition.assignment.strategy": "cooperative-sticky",
        "session.timeout.ms": 6000,
        "heartbeat.interval.ms": 300,
        "enable.auto.commit": not manual,
        # librdkafka's timer skips its auto-commits while the member rebalances.
        "auto.commit.interval.ms": 100,
        "on_commit": on_commit,
        "error_cb": lambda e: seen.errors.append(f"client: {e}"),
    })  # fmt: skip

    def commit() -> None:
        try:
            result = consumer.commit(asynchronous=False)
        except KafkaException as exc:
            if exc.args[0].code() == KafkaError._NO_OFFSET:
                return  # nothing consumed since the last commit
            raise
        seen.commits.append({tp.partition: tp.offset for tp in result if not tp.error})
        seen.errors.extend(f"commit: {tp.error}" for tp in result if tp.error)

    def on_revoke(c, partitions) -> None:
        revoked = {tp.partition for tp in partitions}
        seen.positions_at_revoke.append({p: o for p, o in next_offset.items() if p in revoked})
        if manual:  # (auto-commit: librdkafka commits them once this returns)
            try:
                commit()
            except KafkaException as exc:  # fails the test: a revocation's commit must land
                seen.errors.append(f"revoke commit: {exc}")
                seen.commit_error_codes.append(exc.args[0].code())

    consumer.subscribe([topic], on_revoke=on_revoke)
    try:
        while not stop.is_set():
            msg = consumer.poll(0.05)
            if msg is None:
                continue
            if msg.error():
                seen.errors.append(f"poll: {msg.error()}")
                continue
            seen.records.append((msg.partition(), msg.offset()))
            next_offset[msg.partition()] = msg.offset() + 1
            time.sleep(0.004)  # slow enough that the rebalance comes mid-stream
            if manual and commit_every and len(seen.records) % commit_every == 0:
                try:  # the application's own commits, before and during the rebalance
                    commit()
                except KafkaException as exc:
                    seen.errors.append(f"commit: {exc}")
                    seen.commit_error_codes.append(exc.args[0].code())
    finally:
        consumer.close()


class Member:
    def __init__(self, bootstrap, group, topic, mode, commit_every=None) -> None:
        self.seen, self._stop = Seen(), threading.Event()
        args = (bootstrap, group, topic, mode, commit_every, self.seen, self._stop)
        self._thread = threading.Thread(target=_consume, args=args, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(30)
        assert not self._thread.is_alive()


@pytest.mark.parametrize("mode", ["manual", "auto"])
def test_commits_from_the_revocation_land_through_a_cooperative_rebalance(group_broker, mode):
    bootstrap = group_broker.bootstrap
    topic, group = fresh("coop"), fresh("coop-group")
    create_topic(group_broker, topic, PARTITIONS, factor=1)
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(PARTITIONS * PER_PARTITION):
        producer.produce(topic, value=b"%d" % i, partition=i % PARTITIONS)
    assert producer.flush(30) == 0
    everything = {(p, o) for p in range(PARTITIONS) for o in range(PER_PARTITION)}

    # The first member (the group's leader throughout) commits from its revocation callback
    # only: a leader's own commit sent between its JoinGroup answer and its SyncGroup (while
    # it fetches metadata for the assignor) is REBALANCE_IN_PROGRESS, in Kafka too. The
    # second, a follower, also commits every few records (its SyncGroup follows its
    # JoinGroup answer at once, so its commits never meet that state).
    first = Member(bootstrap, group, topic, mode)
    second = None
    try:
        wait_for(lambda: len(first.seen.records) >= 100, "the first member consuming")
        second = Member(bootstrap, group, topic, mode, commit_every=10)
        wait_for(lambda: second.seen.records, "the second member consuming")
        wait_for(
            lambda: {*first.seen.records, *second.seen.records} >= everything,
            "every record consumed",
        )
    finally:
        first.close()
        if second is not None:
            second.close()

    # No error reached the first member. The second's own commits sent behind its
    # JoinGroup carry the generation before and are refused ILLEGAL_GENERATION, as Kafka
    # refuses them; never REBALANCE_IN_PROGRESS.
    assert first.seen.errors == []
    assert set(second.seen.commit_error_codes) <= {KafkaError.ILLEGAL_GENERATION}
    assert all(e.startswith("commit:") for e in second.seen.errors), second.seen.errors
    # The first member gave partitions up, and its commits stored exactly where it stood on
    # them (the revocation's commit, or one before it with nothing consumed since).
    assert first.seen.positions_at_revoke
    for position in first.seen.positions_at_revoke:
        for p, o in position.items():
            assert any(c.get(p) == o for c in first.seen.commits), (p, o, first.seen.commits)
    # ... and the second started there: nothing lost, nothing read twice.
    counts = Counter(first.seen.records + second.seen.records)
    assert set(counts) == everything
    assert [pos for pos, n in counts.items() if n > 1] == []
    # Closing commits the rest: the group's offsets are the partitions' ends (OffsetFetch).
    assert committed_offsets(bootstrap, group) == {
        (topic, p): PER_PARTITION for p in range(PARTITIONS)
    }
