"""The ZooKeeper consumer (broker/client/zk_consumer) and its offset checker against three
broker processes and a real ZooKeeper: members killed, joining and leaving while a
producer writes; ownership conflicts; the checker's table.

Members of the kill test are processes (tests/helpers/zk_consumer_member.py) so kill -9
ends their ZooKeeper session the way a crash does; the others are ZkConsumers in threads
of the test, each with its own session. Every test has its own topic and group on the
module's cluster; no broker is stopped."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewPartitions
from kazoo.client import KazooClient

from broker.client.producer import Producer
from broker.client.simple_consumer import SimpleConsumer
from broker.client.zk_consumer import RebalanceFailedError, ZkConsumer, zk_group
from broker.client.zk_consumer.assignment import range_assignment
from broker.processes import ROOT, kazoo_session
from broker.tools import zk_offset_checker
from broker.zk import layout as z
from tests.helpers.cluster import create_topic, fresh, wait_for
from tests.helpers.zk_consumer_member import read_log

PARTITIONS = 6
# Quick enough for a test: ZooKeeper's least session timeout at its 2 s tick is 4 s.
FAST = {
    "auto.offset.reset": "smallest",
    "auto.commit.interval.ms": "300",
    "rebalance.backoff.ms": "200",
    "rebalance.max.retries": "50",
    "zookeeper.session.timeout.ms": "4000",
}


def owners(zk, group: str, topic: str, partitions: int = PARTITIONS) -> dict[int, str]:
    found = {p: zk_group.owner(zk, group, topic, p) for p in range(partitions)}
    return {p: thread for p, thread in found.items() if thread is not None}


def expected_owners(group: str, member_ids: list[str], partitions: int = PARTITIONS):
    """partition -> owning thread by the range assignment over `member_ids`."""
    threads = [f"{group}_{m}-0" for m in member_ids]
    return {p: t for t, ps in range_assignment(range(partitions), threads).items() for p in ps}


def committed(zk, group: str, topic: str, partitions: int = PARTITIONS) -> dict[int, int | None]:
    return {p: zk_group.committed_offset(zk, group, topic, p) for p in range(partitions)}


def log_ends(cluster, topic: str, partitions: int = PARTITIONS) -> dict[int, int]:
    with SimpleConsumer(cluster.bootstrap) as consumer:
        return {p: consumer.latest_offset(topic, p) for p in range(partitions)}


class Writer:
    """Our acks=all producer writing `count` keyed records from a thread, a little at a
    time; `written()` is the (partition, offset) of every acknowledged record."""

    def __init__(self, cluster, topic: str, count: int, pause_every: int = 10) -> None:
        self.producer = Producer(cluster.bootstrap, linger_ms=2)
        self.topic, self.count, self.pause_every = topic, count, pause_every
        self.futures: list = []
        self.thread = threading.Thread(target=self._run, name="test-writer")

    def _run(self) -> None:
        for i in range(self.count):
            self.futures.append(self.producer.send(self.topic, b"%06d" % i, key=b"%d" % i))
            if i % self.pause_every == 0:
                time.sleep(0.005)

    def __enter__(self) -> Writer:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.thread.join()
        self.producer.close()

    def written(self) -> set[tuple[int, int]]:
        self.thread.join()
        return {(m.partition, m.offset) for m in (f.result(60) for f in self.futures)}


class Member:
    """A ZkConsumer polling in a thread of the test; keeps (partition, offset) of what it
    got; `close()` closes it from its own thread (the consumer is single-threaded)."""

    def __init__(self, topic: str, config: dict) -> None:
        self.consumer = ZkConsumer([topic], config)
        self.got: list[tuple[int, int]] = []
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name=self.consumer.consumer_id)
        self.thread.start()

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                self.got += [(r.partition, r.offset) for r in self.consumer.poll(100)]
        except BaseException as exc:  # reported by the test
            self.error = exc
        finally:
            self.consumer.close()

    def close(self) -> None:
        self._stop.set()
        self.thread.join(30)
        assert not self.thread.is_alive() and self.error is None, self.error


def spawn_member(cluster, group, topic, member_id, log: Path) -> subprocess.Popen:
    settings = [f"{k}={v}" for k, v in FAST.items()]
    return subprocess.Popen(
        [sys.executable, "-m", "tests.helpers.zk_consumer_member"]
        + [cluster.zookeeper_connect, group, topic, member_id, str(log), *settings],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


@pytest.mark.slow
def test_three_members_one_killed_every_record_consumed_offsets_in_zookeeper(cluster, tmp_path):
    topic, group = fresh("zkc-kill"), fresh("grp")
    create_topic(cluster, topic, PARTITIONS)
    ids = ["m0", "m1", "m2"]
    logs = {m: tmp_path / f"{m}.log" for m in ids}
    procs = {m: spawn_member(cluster, group, topic, m, logs[m]) for m in ids}
    try:
        with kazoo_session(cluster.zookeeper_connect) as zk:
            wait_for(lambda: owners(zk, group, topic) == expected_owners(group, ids), "3 owners")
            with Writer(cluster, topic, 3000, pause_every=3) as writer:
                victim = "m1"
                wait_for(lambda: len(read_log(logs[victim])) >= 100, "the victim consuming")
                procs[victim].kill()  # kill -9: its znodes stay until its session expires
                procs[victim].wait()
                survivors = ["m0", "m2"]
                wait_for(
                    lambda: owners(zk, group, topic) == expected_owners(group, survivors),
                    "the survivors own every partition",
                )
                written = writer.written()
            assert len(written) == 3000

            def consumed():
                return Counter(rec for m in ids for rec in read_log(logs[m]))

            wait_for(lambda: set(consumed()) >= written, "every record consumed")
            ends = log_ends(cluster, topic)
            assert sum(ends.values()) == 3000
            wait_for(lambda: committed(zk, group, topic) == ends, "offsets at the log ends")
            assert owners(zk, group, topic) == expected_owners(group, survivors)
            assert sorted(zk.get_children(z.consumer_ids_path(group))) == [
                f"{group}_{m}" for m in survivors
            ]

            # Duplicates: only the records the victim processed after its last commit,
            # read again by the partition's next owner: per partition, a tail of the
            # victim's reads, each twice.
            counts = consumed()
            assert set(counts) == written
            victim_reads = read_log(logs[victim])
            for partition in range(PARTITIONS):
                dups = sorted(o for (p, o), n in counts.items() if p == partition and n > 1)
                assert all(counts[(partition, o)] == 2 for o in dups)
                mine = sorted(o for p, o in victim_reads if p == partition)
                assert dups == mine[len(mine) - len(dups) :], (partition, dups)
            for m in survivors:
                assert len(read_log(logs[m])) == len(set(read_log(logs[m])))

            for m in survivors:
                procs[m].send_signal(signal.SIGTERM)
            assert [procs[m].wait(30) for m in survivors] == [0, 0]
            assert owners(zk, group, topic) == {}
            assert zk.get_children(z.consumer_ids_path(group)) == []
            assert committed(zk, group, topic) == ends
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def test_a_member_joining_and_one_closing_rebalance_without_loss(cluster):
    topic, group = fresh("zkc-join"), fresh("grp")
    create_topic(cluster, topic, PARTITIONS)
    config = {"zookeeper.connect": cluster.zookeeper_connect, "group.id": group, **FAST}
    with kazoo_session(cluster.zookeeper_connect) as zk, Writer(cluster, topic, 2000, 4) as writer:
        a = Member(topic, {**config, "consumer.id": "a"})
        try:
            wait_for(lambda: owners(zk, group, topic) == expected_owners(group, ["a"]), "a owns")
            wait_for(lambda: len(a.got) >= 200, "a consuming")
            b = Member(topic, {**config, "consumer.id": "b"})
            try:
                wait_for(
                    lambda: owners(zk, group, topic) == expected_owners(group, ["a", "b"]),
                    "a and b share",
                )
                wait_for(lambda: b.got, "b consuming")
                a.close()
                wait_for(
                    lambda: owners(zk, group, topic) == expected_owners(group, ["b"]),
                    "b owns all",
                )
                written = writer.written()
                wait_for(lambda: set(a.got + b.got) >= written, "every record consumed")
            finally:
                b.close()
        finally:
            if a.thread.is_alive():
                a.close()
        # Clean rebalances commit what was processed before releasing: nothing twice.
        assert Counter(a.got + b.got).most_common(1)[0][1] == 1
        assert {p for p, _ in a.got} == {p for p, _ in b.got} == set(range(PARTITIONS))
        assert committed(zk, group, topic) == log_ends(cluster, topic)
        assert owners(zk, group, topic) == {}
        assert zk.get_children(z.consumer_ids_path(group)) == []


def test_a_partition_still_owned_by_another_is_retried_then_given_up(cluster):
    topic, group = fresh("zkc-conflict"), fresh("grp")
    create_topic(cluster, topic, 2)
    config = {"zookeeper.connect": cluster.zookeeper_connect, "group.id": group, **FAST}
    with kazoo_session(cluster.zookeeper_connect) as intruder:
        # A previous owner that has not released partition 1 yet.
        intruder.create(
            z.consumer_owner_path(group, topic, 1), b"old-0", ephemeral=True, makepath=True
        )
        member = ZkConsumer([topic], {**config, "consumer.id": "c"})
        try:
            time.sleep(1.0)  # several attempts (200 ms apart) meet the conflict
            assert member.assignment() == [] and member.poll(100) == []
            with kazoo_session(cluster.zookeeper_connect) as zk:
                # A failed attempt releases what it claimed: between attempts the member
                # holds nothing (partition 0 is free for whoever else needs it).
                assert owners(zk, group, topic).get(0, f"{group}_c-0") == f"{group}_c-0"
                wait_for(lambda: owners(zk, group, topic) == {1: "old-0"}, "p0 released")
                intruder.delete(z.consumer_owner_path(group, topic, 1))
                wait_for(lambda: member.assignment() == [(topic, 0), (topic, 1)], "claimed")
                assert owners(zk, group, topic) == {0: f"{group}_c-0", 1: f"{group}_c-0"}
        finally:
            member.close()

        # Retries exhausted: poll() says so.
        intruder.create(
            z.consumer_owner_path(group, topic, 0), b"old-0", ephemeral=True, makepath=True
        )
        quick = {**config, "consumer.id": "d", "rebalance.max.retries": "2"}
        member = ZkConsumer([topic], quick)
        try:
            with pytest.raises(RebalanceFailedError, match="after 2 attempts"):
                deadline = time.monotonic() + 20
                while time.monotonic() < deadline:
                    member.poll(100)
        finally:
            member.close()


def test_offset_checker_prints_offsets_log_sizes_lag_and_owners(cluster, capsys):
    topic, group = fresh("zkc-check"), fresh("grp")
    create_topic(cluster, topic, 2)
    with Producer(cluster.bootstrap) as producer:
        for i in range(5):
            producer.send(topic, b"%d" % i, partition=0)
        for i in range(3):
            producer.send(topic, b"%d" % i, partition=1)
        producer.flush(30)
    with kazoo_session(cluster.zookeeper_connect) as zk:
        zk.create(z.consumer_offset_path(group, topic, 0), b"2", makepath=True)
        zk.create(z.consumer_owner_path(group, topic, 0), b"g_x-0", ephemeral=True, makepath=True)
        code = zk_offset_checker.main(["--zookeeper", cluster.zookeeper_connect, "--group", group])
        out = capsys.readouterr().out
    assert code == 0
    row = zk_offset_checker.ROW
    assert out.splitlines() == [
        row % ("Group", "Topic", "Pid", "Offset", "logSize", "Lag", "Owner"),
        row % (group, topic, 0, 2, 5, 3, "g_x-0"),
        row % (group, topic, 1, "unknown", 3, "unknown", "none"),
    ]
    assert out.splitlines()[0].split() == [
        "Group",
        "Topic",
        "Pid",
        "Offset",
        "logSize",
        "Lag",
        "Owner",
    ]

    assert (
        zk_offset_checker.main(["--zookeeper", cluster.zookeeper_connect, "--group", "nope"]) == 1
    )
    assert "no consumer group 'nope'" in capsys.readouterr().err
    assert zk_offset_checker.main(["--zookeeper", cluster.zookeeper_connect]) == 2
    assert "--group" in capsys.readouterr().err


def test_partitions_added_to_a_topic_are_taken_up(cluster):
    topic, group = fresh("zkc-grow"), fresh("grp")
    create_topic(cluster, topic, 2)
    config = {"zookeeper.connect": cluster.zookeeper_connect, "group.id": group, **FAST}
    member = Member(topic, {**config, "consumer.id": "m"})
    try:
        with kazoo_session(cluster.zookeeper_connect) as zk:
            wait_for(lambda: owners(zk, group, topic) == expected_owners(group, ["m"], 2), "owns")
            admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
            admin.create_partitions([NewPartitions(topic, 4)])[topic].result(30)
            wait_for(
                lambda: owners(zk, group, topic) == expected_owners(group, ["m"], 4),
                "the new partitions owned",
            )
        with Producer(cluster.bootstrap) as producer:
            sent = [producer.send(topic, b"x", partition=p) for p in (2, 3)]
            written = {(m.partition, m.offset) for m in (f.result(30) for f in sent)}
        wait_for(lambda: set(member.got) >= written, "records of the new partitions consumed")
    finally:
        member.close()


def test_a_member_whose_session_expires_registers_again_and_carries_on(cluster):
    topic, group = fresh("zkc-expire"), fresh("grp")
    create_topic(cluster, topic, PARTITIONS)
    config = {"zookeeper.connect": cluster.zookeeper_connect, "group.id": group, **FAST}
    member = Member(topic, {**config, "consumer.id": "e"})
    try:
        with kazoo_session(cluster.zookeeper_connect) as zk:
            with Writer(cluster, topic, 2000, 4) as writer:
                wait_for(lambda: owners(zk, group, topic) == expected_owners(group, ["e"]), "owns")
                wait_for(lambda: len(member.got) >= 100, "consuming")
                session = member.consumer._zk.client_id
                # Closing a second client on the same session ends it, as ZooKeeper does
                # when a session times out: the member's ephemeral znodes go.
                other = KazooClient(hosts=cluster.zookeeper_connect, client_id=session)
                other.start(10)
                other.stop()
                other.close()
                wait_for(
                    lambda: (
                        (member.consumer._zk.client_id or session)[0] != session[0]
                        and owners(zk, group, topic) == expected_owners(group, ["e"])
                        and zk.get_children(z.consumer_ids_path(group)) == [f"{group}_e"]
                    ),
                    "registered and owning again in a new session",
                )
                written = writer.written()
            wait_for(lambda: set(member.got) >= written, "every record consumed")
    finally:
        member.close()
    with kazoo_session(cluster.zookeeper_connect) as zk:
        assert committed(zk, group, topic) == log_ends(cluster, topic)


def test_without_auto_commit_only_commit_writes_offsets(cluster):
    topic, group = fresh("zkc-manual"), fresh("grp")
    create_topic(cluster, topic, 2)
    config = {
        "zookeeper.connect": cluster.zookeeper_connect,
        "group.id": group,
        **FAST,
        "auto.commit.enable": "false",
    }
    with Producer(cluster.bootstrap) as producer:
        for p in (0, 1):
            for i in range(4):
                producer.send(topic, b"%d" % i, partition=p)
    with kazoo_session(cluster.zookeeper_connect) as zk:
        with ZkConsumer([topic], config) as consumer:
            # The id Kafka makes, and its registration as Kafka 0.8 wrote it.
            host = re.escape(socket.gethostname())
            assert re.fullmatch(f"{group}_{host}-[0-9]{{13}}-[0-9a-f]{{8}}", consumer.consumer_id)
            data, _ = zk.get(z.consumer_id_path(group, consumer.consumer_id))
            registration = json.loads(data)
            assert registration.pop("timestamp").isdigit()
            assert registration == {"version": 1, "subscription": {topic: 1}, "pattern": "static"}
            got = []
            wait_for(lambda: got.extend(consumer.poll(100)) or len(got) >= 8, "8 records")
            time.sleep(0.5)  # more than auto.commit.interval.ms: nothing is written
            assert committed(zk, group, topic, 2) == {0: None, 1: None}
            consumer.commit()
            assert committed(zk, group, topic, 2) == {0: 4, 1: 4}
            with Producer(cluster.bootstrap) as producer:
                producer.send(topic, b"late", partition=0).result(30)
            wait_for(lambda: consumer.poll(100), "the late record")
        # close() without auto commit leaves the last commit as it was.
        assert committed(zk, group, topic, 2) == {0: 4, 1: 4}
        assert owners(zk, group, topic, 2) == {}
