"""Consumer groups on our broker (its own process), driven by confluent-kafka (librdkafka).
Each measure prints a ratio taken in the same run:

- rebalance: members (`tests/helpers/group_member.py`, each in a thread, heartbeating every
  500 ms) of a group consuming a 6-partition topic that a producer writes to at a steady
  rate. `first`: three members start together in an empty group (the first rebalance waits
  `group.initial.rebalance.delay.ms`); `join`: a fourth member joins the stable group of
  three. The time runs from the members' start to the group consuming again: every
  partition assigned and a record consumed by its new owner after its assignment. Printed
  minus the coordinator's own waits (`first`: the delay, extended once by the members
  joining during it, as Kafka does; `join`: none), and as a ratio to the target, the delay
  + 1 s (target <= 1);
- commit: synchronous OffsetCommits of N partitions (a consumer's `commit(offsets,
  asynchronous=False)`) against synchronous Produce requests of one record to each of the
  same N partitions (`produce` N times, then `flush()`, linger 0) from the same client
  library on the same broker, alternating; requests per second, ratio commits/produces.

    .venv/bin/python -m bench.bench_groups [--only rebalance,commit] [--runs 3]
        [--delay-ms 3000] [--partitions 6] [--seconds 5]

Results: docs/benchmarks.md, "Broker: consumer groups".
"""

from __future__ import annotations

import argparse
import tempfile
import time
import uuid
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from bench.common import report, running_broker
from tests.helpers.cluster import Traffic, wait_for
from tests.helpers.group_history import owners, read_events, wait_assigned
from tests.helpers.group_member import MemberSpec, MemberThread
from tests.helpers.group_state import coordinator_of

MEASURES = ("rebalance", "commit")
TOPIC_PARTITIONS = 6
SECOND_S = 1.0


def fresh(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def create(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)


# -- rebalance ---------------------------------------------------------------------------------


def consuming_again(members, since: float) -> float | None:
    """When the group was consuming again after `since`: for every partition, the first
    record its current owner consumed after being assigned it (and after `since`); the
    latest of those. None until every partition has one."""
    latest = since
    found = owners(members)
    for m in members:
        events = read_events(m.spec.events)
        assigned_at: dict[int, float] = {}
        for e in events:
            if e["ev"] == "assign":
                assigned_at.update(dict.fromkeys(e["partitions"], e["t"]))
        for p in found[m.spec.name]:
            first = next(
                (
                    e["t"]
                    for e in events
                    if e["ev"] == "consumed" and e["p"] == p and e["t"] > max(since, assigned_at[p])
                ),
                None,
            )
            if first is None:
                return None
            latest = max(latest, first)
    return latest if all(found.values()) else None


def rebalance_run(bootstrap: str, work: Path, joining: bool) -> float:
    """Seconds from the members' start to the group consuming again."""
    topic, group = fresh("rebalance"), fresh("rebalance-group")
    create(bootstrap, topic, TOPIC_PARTITIONS)

    def member(name: str) -> MemberThread:
        return MemberThread(MemberSpec(name, bootstrap, group, topic, work / f"{topic}-{name}"))

    members = [member(f"m{i}") for i in range(3)]
    started: list[MemberThread] = []
    with Traffic(bootstrap, topic, partitions=TOPIC_PARTITIONS, rate=600):
        try:
            if joining:
                started += [m.start() for m in members]
                wait_assigned(started, TOPIC_PARTITIONS, "three members")
                wait_for(lambda: consuming_again(started, 0.0), "three members consuming")
                members = [member("m3")]
            since = time.monotonic()
            started += [m.start() for m in members]
            at = wait_for(lambda: consuming_again(started, since), "consuming again", 120)
        finally:
            for m in started:
                m.close()
    return at - since


def measure_rebalance(runs: int, delay_ms: int) -> None:
    """The coordinator's own waits are taken off: `first` waits the delay and, as the other
    two members join during it, once more (Kafka's InitialDelayedJoin); `join` waits
    nothing (the delay is only for an empty group's first rebalance)."""
    target_s = delay_ms / 1000 + SECOND_S
    waits_s = {"first": 2 * delay_ms / 1000, "join": 0.0}
    with running_broker(**{"group.initial.rebalance.delay.ms": str(delay_ms)}) as (bootstrap, _):
        # __consumer_offsets is created by the first lookup: not part of any run.
        wait_for(lambda: coordinator_of(bootstrap, "warm-up") is not None, "a coordinator")
        with tempfile.TemporaryDirectory(prefix="bench-groups-") as work:
            for joining, name in ((False, "first"), (True, "join")):
                for _ in range(runs):
                    elapsed = rebalance_run(bootstrap, Path(work), joining)
                    beyond = elapsed - waits_s[name]
                    print(
                        f"rebalance {name}: {elapsed * 1000:,.0f} ms to consuming, "
                        f"{beyond * 1000:,.0f} ms beyond the coordinator's waits "
                        f"({waits_s[name] * 1000:,.0f} ms), ratio to the delay + 1 s "
                        f"{elapsed / target_s:.2f}, beyond the waits / 1 s {beyond:.2f}",
                        flush=True,
                    )


# -- commit ------------------------------------------------------------------------------------


def commits_per_s(bootstrap: str, topic: str, partitions: int, seconds: float) -> float:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": fresh("commits"), "enable.auto.commit": False}
    )
    try:
        count, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            offsets = [TopicPartition(topic, p, count) for p in range(partitions)]
            consumer.commit(offsets=offsets, asynchronous=False)
            count += 1
        return count / (time.perf_counter() - start)
    finally:
        consumer.close()


def produces_per_s(bootstrap: str, topic: str, partitions: int, seconds: float) -> float:
    producer = Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": 1, "enable.idempotence": False}
    )
    producer.produce(topic, b"warm-up", partition=0)  # metadata and connection first
    producer.flush(30)
    count, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        for p in range(partitions):
            producer.produce(topic, b"x" * 100, partition=p)
        assert producer.flush(30) == 0
        count += 1
    return count / (time.perf_counter() - start)


def measure_commit(runs: int, partitions: int, seconds: float) -> None:
    with running_broker() as (bootstrap, _):
        topic = fresh("commit")
        create(bootstrap, topic, partitions)
        for _ in range(runs):
            produced = produces_per_s(bootstrap, topic, partitions, seconds)
            committed = commits_per_s(bootstrap, topic, partitions, seconds)
            report(
                f"synchronous requests of {partitions} partitions",
                committed,
                produced,
                "req/s",
                "Produce",
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default=",".join(MEASURES))
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--delay-ms", type=int, default=3000)
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--seconds", type=float, default=5.0)
    args = parser.parse_args()
    only = set(args.only.split(","))
    unknown = only - set(MEASURES)
    if unknown:
        parser.error(f"unknown measures {sorted(unknown)}; choose from {MEASURES}")
    if "rebalance" in only:
        measure_rebalance(args.runs, args.delay_ms)
    if "commit" in only:
        measure_commit(args.runs, args.partitions, args.seconds)


if __name__ == "__main__":
    main()
