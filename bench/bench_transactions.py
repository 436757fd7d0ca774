"""Transactions (issue 25, item 7): what exactly-once costs against the same broker(s) in the
same run, with confluent-kafka (acks=all, linger 5 ms, 100 B records).

- produce: the idempotent producer for `--seconds`, then a transactional one for as long,
  committing a transaction every `--txn-ms` (100 ms), `--rounds` times (the best of each
  counted); target transactional/idempotent ≥ 0.7. Each is timed from its first record to
  its last acknowledgement (the transactional one to its last commit);
- consume: the transactional phases' records (committed transactions and their markers)
  read from offset 0 to the end, read_uncommitted and read_committed alternately
  (`--rounds` each, the best of each counted); target read_committed/read_uncommitted
  ≥ 0.9.

One broker, or with `--cluster` three (ZooKeeper, RF=3, min.insync.replicas=2).
`--profile DIR` samples every broker with py-spy during the transactional produce and the
read_committed consume (`python -m bench.profile_summary DIR/*.txt` summarises).

    .venv/bin/python -m bench.bench_transactions [--seconds 3] [--txn-ms 100]
        [--partitions 3] [--rounds 2] [--cluster] [--profile DIR]

Results: docs/benchmarks.md, "Broker: transactions".
"""

from __future__ import annotations

import argparse
import contextlib
import tempfile
import time
import uuid
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from bench.common import report, running_cluster
from bench.probes import profiled, wait_until
from broker.processes import BrokerProcess

PAYLOAD = b"x" * 100
PRODUCER = {"acks": "all", "linger.ms": 5, "queue.buffering.max.messages": 1_000_000}


class _OneBroker:
    """A single BrokerProcess shaped as the Cluster `profiled` samples."""

    def __init__(self, broker: BrokerProcess):
        self._broker = broker
        self.ids = [0]
        self.bootstrap = broker.bootstrap

    def broker(self, broker_id: int) -> BrokerProcess:
        return self._broker


@contextlib.contextmanager
def brokers(cluster: bool):
    settings = {"group.initial.rebalance.delay.ms": "0"}
    if cluster:
        with running_cluster(3, **settings, **{"min.insync.replicas": "2"}) as c:
            yield c
        return
    with tempfile.TemporaryDirectory(prefix="bench-txn-") as work:
        logs = Path(work) / "logs"
        with BrokerProcess(logs, settings, log_path=Path(work) / "broker.log") as b:
            yield _OneBroker(b)


def create(bootstrap: str, topic: str, partitions: int, factor: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, factor)])[topic].result(30)

    def led() -> bool:
        md = admin.list_topics(topic, timeout=10).topics[topic]
        return len(md.partitions) == partitions and all(
            p.leader >= 0 for p in md.partitions.values()
        )

    wait_until(led, time.monotonic() + 30, f"{topic} led")


def _produce_for(producer: Producer, topic: str, until: float, partitions: int) -> int:
    sent = 0
    while time.perf_counter() < until:
        try:
            producer.produce(topic, PAYLOAD, partition=sent % partitions)
            sent += 1
        except BufferError:
            producer.poll(0.001)
        if sent % 1000 == 0:
            producer.poll(0)
    return sent


def produce_idempotent(bootstrap: str, topic: str, seconds: float, partitions: int) -> float:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, **PRODUCER})
    producer.list_topics(topic, timeout=10)  # metadata before the clock starts
    start = time.perf_counter()
    sent = _produce_for(producer, topic, start + seconds, partitions)
    assert producer.flush(120) == 0
    return sent / (time.perf_counter() - start)


def produce_transactional(
    bootstrap: str, topic: str, seconds: float, partitions: int, txn_ms: float
) -> tuple[float, int, int]:
    """(records/s, records, transactions)."""
    producer = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": f"bench-{topic}", **PRODUCER}
    )
    producer.init_transactions(60)
    producer.list_topics(topic, timeout=10)
    start = time.perf_counter()
    end = start + seconds
    sent = transactions = 0
    while time.perf_counter() < end:
        producer.begin_transaction()
        sent += _produce_for(
            producer, topic, min(end, time.perf_counter() + txn_ms / 1000), partitions
        )
        producer.commit_transaction(60)
        transactions += 1
    return sent / (time.perf_counter() - start), sent, transactions


def consume(bootstrap: str, topic: str, partitions: int, expected: int, isolation: str) -> float:
    """Every record of the topic from offset 0, records/s."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-{uuid.uuid4().hex[:6]}",
            "enable.auto.commit": False,
            "isolation.level": isolation,
            "fetch.max.bytes": 52428800,
            "max.partition.fetch.bytes": 10485760,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got = 0
    start = time.perf_counter()
    deadline = time.monotonic() + 120
    while got < expected:
        for msg in consumer.consume(10000, timeout=1):
            if msg.error():
                raise RuntimeError(msg.error())
            got += 1
        if time.monotonic() > deadline:
            raise TimeoutError(f"{isolation}: {got} of {expected} records")
    elapsed = time.perf_counter() - start
    consumer.close()
    return got / elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--txn-ms", type=float, default=100.0)
    parser.add_argument("--partitions", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--cluster", action="store_true", help="three brokers, RF=3")
    parser.add_argument("--profile", type=Path, help="py-spy's collapsed stacks go here")
    args = parser.parse_args()
    factor = 3 if args.cluster else 1
    where = "3 brokers, RF=3" if args.cluster else "1 broker"
    with brokers(args.cluster) as c:
        bootstrap = c.bootstrap
        plain, txn = f"idem-{uuid.uuid4().hex[:6]}", f"txn-{uuid.uuid4().hex[:6]}"
        for topic in (plain, txn):
            create(bootstrap, topic, args.partitions, factor)
        # Warm-up: the transaction state topic is created by the first transactional id.
        warm = Producer({"bootstrap.servers": bootstrap, "transactional.id": "bench-warm"})
        warm.init_transactions(120)
        del warm  # closed now, not after the brokers stopped
        idempotent = transactional = 0.0
        records = count = 0
        for _ in range(args.rounds):  # alternated, the best of each: the host is shared
            rate = produce_idempotent(bootstrap, plain, args.seconds, args.partitions)
            idempotent = max(idempotent, rate)
            with profiled(c, args.profile, "produce-transactional"):
                rate, sent, transactions = produce_transactional(
                    bootstrap, txn, args.seconds, args.partitions, args.txn_ms
                )
            transactional = max(transactional, rate)
            records, count = records + sent, count + transactions
        print(f"{count} transactions of {records / count:,.0f} records", flush=True)
        report(
            f"produce 100 B, acks=all, {args.txn_ms:.0f} ms transactions ({where})",
            transactional,
            idempotent,
            "msg/s",
            "idempotent",
        )
        best = {"read_uncommitted": 0.0, "read_committed": 0.0}
        for _ in range(args.rounds):
            for isolation in best:
                profile = args.profile if isolation == "read_committed" else None
                with profiled(c, profile, f"consume-{isolation}"):
                    rate = consume(bootstrap, txn, args.partitions, records, isolation)
                best[isolation] = max(best[isolation], rate)
        report(
            f"consume {records:,} transactional records ({where})",
            best["read_committed"],
            best["read_uncommitted"],
            "msg/s",
            "read_uncommitted",
        )


if __name__ == "__main__":
    main()
