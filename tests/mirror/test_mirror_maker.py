"""MirrorMaker between two clusters (three brokers and two, each on its own ZooKeeper
chroot), run as Kafka's tool runs: a process, killed -9 in the middle and started again.
The target holds every source record, in the same partition with its key, headers and
timestamp; the duplicates are exactly what the first run had mirrored past its last
commit; `--verify` reports them; the group's lag is 0 at the end."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.admin import KafkaAdminClient

from broker.client.simple_consumer import SimpleConsumer
from broker.mirror.verify import compare
from tests.helpers.cluster import fresh, in_sync, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.clients]

ROOT = Path(__file__).resolve().parents[2]
PARTITIONS = 3


def records_in(bootstrap: str, topic: str) -> int:
    with SimpleConsumer(bootstrap) as consumer:
        return sum(
            consumer.latest_offset(topic, p) - consumer.earliest_offset(topic, p)
            for p in consumer.partitions_for(topic)
        )


def produce(bootstrap: str, topic: str, start: int, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    for i in range(start, start + count):
        producer.produce(
            topic,
            key=b"key-%d" % (i % 97),
            value=b"record-%06d" % i,
            headers=[("n", b"%d" % i)],
            timestamp=1_700_000_000_000 + i,
        )
        producer.poll(0)
    assert producer.flush(60) == 0


def start_mirror(work: Path, source: str, target: str, group: str, log_name: str):
    consumer = work / "source.properties"
    # The restarted mirror joins a group still holding the killed run's member: the join
    # waits until that member's session ends (Kafka's default: 45 s), so a short one.
    consumer.write_text(f"bootstrap.servers={source}\ngroup.id={group}\nsession.timeout.ms=6000\n")
    producer = work / "target.properties"
    producer.write_text(f"bootstrap.servers={target}\nlinger.ms=5\n")
    command = [
        sys.executable, "-m", "broker.tools", "mirror-maker",
        "--consumer.config", str(consumer), "--producer.config", str(producer),
        "--whitelist", "mirrored-.*", "--offset.commit.interval.ms", "300",
    ]  # fmt: skip
    log = open(work / log_name, "w")
    process = subprocess.Popen(command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    return process, command


def committed(source: str, group: str) -> int:
    admin = KafkaAdminClient(bootstrap_servers=source)
    try:
        return sum(o.offset for o in admin.list_group_offsets(group).get(group, {}).values())
    finally:
        admin.close()


def test_mirror_two_clusters_through_a_kill(cluster_factory, tmp_path):
    source = cluster_factory(3, overrides={"group.initial.rebalance.delay.ms": "0"}).bootstrap
    target_cluster = cluster_factory(2)
    target = target_cluster.bootstrap
    topic, group = fresh("mirrored"), fresh("mirror")
    for bootstrap, factor in ((source, 3), (target, 2)):
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic(topic, PARTITIONS, factor)])[topic].result(30)
        wait_for(lambda a=admin, f=factor: in_sync(a, topic, f), f"{topic} at {bootstrap}")
    produce(source, topic, 0, 3000)

    mirror, _ = start_mirror(tmp_path, source, target, group, "mirror-1.log")
    try:
        wait_for(lambda: records_in(target, topic) >= 1000, "a third mirrored", 90)
        time.sleep(0.5)  # some commits behind it, some records past the last one
    finally:
        os.kill(mirror.pid, signal.SIGKILL)
        mirror.wait()
    first_run = wait_for(lambda: _stable(target, topic), "the target settled")
    resumes_at = committed(source, group)
    assert resumes_at <= first_run

    produce(source, topic, 3000, 2000)  # written while no mirror runs
    mirror, command = start_mirror(tmp_path, source, target, group, "mirror-2.log")
    try:
        wait_for(
            lambda: records_in(target, topic) >= 5000 + first_run - resumes_at, "caught up", 90
        )
    finally:
        mirror.send_signal(signal.SIGTERM)
        assert mirror.wait(60) == 0, (tmp_path / "mirror-2.log").read_text()[-2000:]

    (row,) = compare(source, target, [topic])
    assert (row.source, row.missing, row.unknown) == (5000, 0, 0)
    # At least once: the duplicates are the records the killed run mirrored after its
    # last commit, which the second run mirrored again; the clean stop added none.
    assert row.duplicates == first_run - resumes_at
    assert committed(source, group) == 5000

    # The same partition, with key, headers and timestamp (verify's fingerprints), and
    # the tool's report.
    with SimpleConsumer(source) as s, SimpleConsumer(target) as t:
        for p in range(PARTITIONS):
            theirs = {r.value for r in _read(s, topic, p)}
            assert {r.value for r in _read(t, topic, p)} == theirs
    done = subprocess.run(
        [*command, "--verify"], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    header, line = [row for row in done.stdout.splitlines() if row.strip()]
    assert header.split() == [
        "TOPIC", "SOURCE-RECORDS", "TARGET-RECORDS", "MISSING", "DUPLICATES", "UNKNOWN"
    ]  # fmt: skip
    assert line.split() == [
        topic,
        "5000",
        str(5000 + row.duplicates),
        "0",
        str(row.duplicates),
        "0",
    ]

    # The mirror's lag, as an operator sees it: none.
    lag = subprocess.run(
        [sys.executable, "-m", "broker.tools", "consumer-groups", "--bootstrap-server", source,
         "--describe", "--group", group],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    rows = [r.split() for r in lag.stdout.splitlines() if r.startswith(group)]
    assert len(rows) == PARTITIONS and all(r[5] == "0" for r in rows), lag.stdout


def _stable(bootstrap: str, topic: str) -> int | None:
    before = records_in(bootstrap, topic)
    time.sleep(0.5)
    return before if records_in(bootstrap, topic) == before else None


def _read(consumer: SimpleConsumer, topic: str, partition: int) -> list:
    records, offset = [], consumer.earliest_offset(topic, partition)
    end = consumer.latest_offset(topic, partition)
    while offset < end:
        result = consumer.fetch(topic, partition, offset)
        records += list(result.records())
        offset = result.next_offset
    return records
