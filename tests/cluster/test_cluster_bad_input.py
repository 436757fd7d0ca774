"""Bad input to a cluster: controller requests from a stale controller, a second broker
with an id already live, and ZooKeeper going away under running brokers."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer

from broker.client.connection import BrokerConnection
from broker.processes import BrokerProcess
from broker.protocol.apis import LEADER_AND_ISR, METADATA, STOP_REPLICA, UPDATE_METADATA
from broker.protocol.errors import ErrorCode
from tests.helpers.cluster import FAST_FAILOVER, create_topic, fresh, read_partition, wait_for

pytestmark = pytest.mark.clients


def _metadata(broker, topic: str) -> dict:
    conn = BrokerConnection(broker.host.address, broker.port, timeout_s=10)
    try:
        body = {"topics": [{"name": topic}], "allow_auto_topic_creation": False,
                "include_cluster_authorized_operations": False,
                "include_topic_authorized_operations": False}  # fmt: skip
        return conn.request(METADATA, body)
    finally:
        conn.close()


def _send(broker, api_key: int, body: dict) -> dict:
    conn = BrokerConnection(broker.host.address, broker.port, timeout_s=10)
    try:
        return conn.request(api_key, body)
    finally:
        conn.close()


def test_requests_of_a_stale_controller_are_refused_and_change_nothing(cluster):
    topic = fresh("stale")
    placed = create_topic(cluster, topic)
    leader, replicas, isr = placed[0]
    target = cluster.broker(leader)
    # The controller sends LeaderAndIsr before UpdateMetadata, so the leader may lead the
    # partition a moment before its metadata cache names the topic: wait for the cache.
    before = wait_for(
        lambda: (m := _metadata(target, topic))["topics"][0]["error_code"] == 0 and m,
        f"{topic} in broker {leader}'s metadata",
    )
    stale = 0  # every controller epoch of a running cluster is at least 1
    leader_and_isr = {
        "controller_id": 99, "controller_epoch": stale, "broker_epoch": -1,
        "topic_states": [{"topic_name": topic, "partition_states": [{
            "partition_index": 0, "controller_epoch": stale, "leader": 99, "leader_epoch": 999,
            "isr": [99], "zk_version": 0, "replicas": [99], "adding_replicas": [],
            "removing_replicas": [], "is_new": False,
        }]}],
        "live_leaders": [{"broker_id": 99, "host_name": "nowhere", "port": 1}],
    }  # fmt: skip
    answer = _send(target, LEADER_AND_ISR, leader_and_isr)
    assert answer["error_code"] == ErrorCode.STALE_CONTROLLER_EPOCH
    update = {
        "controller_id": 99, "controller_epoch": stale, "broker_epoch": -1,
        "topic_states": [{"topic_name": topic, "partition_states": [{
            "partition_index": 0, "controller_epoch": stale, "leader": -2, "leader_epoch": 999,
            "isr": [], "zk_version": 0, "replicas": [], "offline_replicas": [],
        }]}],
        "live_brokers": [],
    }  # fmt: skip
    assert _send(target, UPDATE_METADATA, update)["error_code"] == ErrorCode.STALE_CONTROLLER_EPOCH
    stop = {
        "controller_id": 99, "controller_epoch": stale, "broker_epoch": -1,
        "delete_partitions": True, "topics": [{"name": topic, "partition_indexes": [0]}],
    }  # fmt: skip
    assert _send(target, STOP_REPLICA, stop)["error_code"] == ErrorCode.STALE_CONTROLLER_EPOCH
    # Nothing changed: same metadata, the partition still led and writable.
    assert _metadata(target, topic) == before
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    producer.produce(topic, value=b"still here", partition=0)
    assert producer.flush(30) == 0
    assert read_partition(cluster.bootstrap, topic) == [b"still here"]


def test_a_second_broker_with_a_live_id_refuses_to_start(cluster, tmp_path):
    duplicate = BrokerProcess(
        tmp_path / "logs",
        {
            "broker.id": "1",
            "zookeeper.connect": cluster.broker(1).overrides["zookeeper.connect"],
            "zookeeper.session.timeout.ms": "4000",
        },
    )
    # It waits out the time a killed broker's registration takes to expire (1.5 session
    # timeouts), finds it still there -- a live broker --, and stops.
    duplicate.spawn()
    wait_for(lambda: duplicate.exit_code() is not None, "the refusal")
    assert duplicate.exit_code() == 1
    text = duplicate.log_text()
    assert "broker.id 1 is already registered in ZooKeeper" in text
    assert "each broker needs its own broker.id" in text
    # The live broker 1 is untouched.
    assert 1 in cluster.registrations()


@pytest.mark.slow
def test_zookeeper_outage_brokers_keep_serving_and_resume(cluster_factory):
    cluster = cluster_factory(
        3,
        zookeeper=None,  # a ZooKeeper of the cluster's own, to stop
        overrides=FAST_FAILOVER,
    )
    topic = fresh("outage")
    create_topic(cluster, topic, partitions=3)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for i in range(300):
        producer.produce(topic, value=b"a%d" % i, partition=i % 3)
    assert producer.flush(30) == 0

    cluster.zookeeper.stop()
    # Without ZooKeeper: every broker still serves what it leads, reads and writes.
    for i in range(300):
        producer.produce(topic, value=b"b%d" % i, partition=i % 3)
    assert producer.flush(60) == 0
    values = []
    for p in range(3):
        values += [v for v in _read(cluster.bootstrap, topic, p)]
    assert sorted(values) == sorted(
        [b"a%d" % i for i in range(300)] + [b"b%d" % i for i in range(300)]
    )
    assert all(cluster.broker(b).exit_code() is None for b in cluster.ids)  # none crashed

    cluster.zookeeper.start()
    # Sessions expired while it was away: the brokers register again, a controller is
    # elected, and new topics can be created.
    wait_for(lambda: sorted(cluster.registrations()) == cluster.ids, "re-registration", 90)
    wait_for(lambda: cluster.controller() is not None, "a controller")
    create_topic(cluster, fresh("after-outage"), partitions=2)
    for i in range(30):
        producer.produce(topic, value=b"c%d" % i, partition=i % 3)
    assert producer.flush(60) == 0


def _read(bootstrap: str, topic: str, partition: int) -> list[bytes]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "assign-only",
            "enable.auto.commit": False,  # no group coordinator to commit to on close
            "enable.partition.eof": True,
        }
    )
    consumer.assign([TopicPartition(topic, partition, 0)])
    got = []
    while True:
        msg = consumer.poll(10)
        assert msg is not None, "no end of partition within 10 s"
        if msg.error():
            break
        got.append(msg.value())
    consumer.close()
    return got
