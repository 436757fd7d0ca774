"""Unmodified clients against three brokers with ZooKeeper: metadata of the whole cluster
from any broker, topics created and deleted through the controller, acks=all at
replication factor 3, consuming from the leaders (confluent-kafka, kafka-python, kcat)."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.helpers.cluster import consume, fresh, leaders, wait_for

pytestmark = pytest.mark.clients


def test_every_broker_answers_metadata_for_the_whole_cluster(cluster):
    for broker in cluster.brokers:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        md = wait_for(
            lambda admin=admin: (m := admin.list_topics(timeout=10)) and len(m.brokers) == 3 and m,
            "three brokers in metadata",
        )
        assert sorted(md.brokers) == cluster.ids
        assert md.controller_id == cluster.controller()
        assert {f"{b.host}:{b.port}" for b in md.brokers.values()} == set(
            cluster.bootstrap.split(",")
        )


def test_confluent_kafka_create_produce_acks_all_consume_delete(cluster):
    topic = fresh("ck-rf3")
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(topic, 3, 3)])[topic].result(30)
    placed = wait_for(lambda: leaders(admin, topic), "leaders")
    assert sorted(leader for leader, _, _ in placed.values()) == [0, 1, 2]  # spread
    for leader, replicas, isr in placed.values():
        assert sorted(replicas) == [0, 1, 2] and sorted(isr) == [0, 1, 2]
        assert replicas[0] == leader  # the preferred (first) replica leads

    producer = Producer(
        {"bootstrap.servers": cluster.bootstrap, "acks": "all", "enable.idempotence": True}
    )
    errors = []
    for i in range(3000):
        producer.produce(
            topic,
            key=b"k%d" % (i % 17),
            value=b"v%d" % i,
            on_delivery=lambda err, msg: errors.append(err) if err else None,
        )
        producer.poll(0)
    assert producer.flush(30) == 0 and errors == []
    got = consume(cluster.bootstrap, topic, 3, 3000)
    assert sorted(m.value() for m in got) == sorted(b"v%d" % i for i in range(3000))

    admin.delete_topics([topic])[topic].result(30)
    wait_for(lambda: topic not in admin.list_topics(timeout=10).topics, "topic gone")


def test_kafka_python_admin_producer_and_consumer(cluster):
    from kafka import KafkaConsumer, KafkaProducer
    from kafka import TopicPartition as KTopicPartition
    from kafka.admin import KafkaAdminClient
    from kafka.admin import NewTopic as KNewTopic

    topic = fresh("kp-rf3")
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=30000)
    try:
        admin.create_topics([KNewTopic(topic, 2, 3)], timeout_ms=30000)
        described = wait_for(
            lambda: (d := admin.describe_topics([topic])) and d[0]["partitions"] and d,
            "topic described",
        )
        assert all(len(p["replica_nodes"]) == 3 for p in described[0]["partitions"])
        producer = KafkaProducer(bootstrap_servers=cluster.bootstrap)  # idempotent, acks=all
        futures = [producer.send(topic, b"m%d" % i, partition=i % 2) for i in range(500)]
        producer.flush(30)
        assert all(f.get(10).offset >= 0 for f in futures)
        producer.close()
        consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap, consumer_timeout_ms=10000)
        consumer.assign([KTopicPartition(topic, 0), KTopicPartition(topic, 1)])
        consumer.seek_to_beginning()
        values = [m.value for m in consumer]
        consumer.close()
        assert sorted(values) == sorted(b"m%d" % i for i in range(500))
        admin.delete_topics([topic], timeout_ms=30000)
    finally:
        admin.close()


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed")
def test_kcat_lists_produces_and_consumes(cluster):
    topic = fresh("kcat-rf3")
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(topic, 2, 3)])[topic].result(30)
    wait_for(lambda: leaders(admin, topic), "leaders")
    listing = subprocess.run(
        ["kcat", "-b", cluster.bootstrap, "-L", "-t", topic],
        capture_output=True, text=True, timeout=60, check=True,
    ).stdout  # fmt: skip
    assert "3 brokers:" in listing and "replicas: " in listing
    lines = "".join(f"line {i}\n" for i in range(200))
    subprocess.run(
        ["kcat", "-b", cluster.bootstrap, "-P", "-t", topic, "-X", "acks=all"],
        input=lines, text=True, timeout=60, check=True,
    )  # fmt: skip
    out = subprocess.run(
        ["kcat", "-b", cluster.bootstrap, "-C", "-t", topic, "-o", "beginning", "-e", "-q"],
        capture_output=True, text=True, timeout=60, check=True,
    ).stdout  # fmt: skip
    assert sorted(out.split("\n")[:-1]) == sorted(lines.split("\n")[:-1])


def test_our_transactional_producer_with_the_coordinator_on_another_broker(cluster):
    """Our client's transactions across brokers: the transaction coordinator of its id and
    the leaders of its two partitions are three different brokers, so AddPartitionsToTxn,
    the Produce (verified with the coordinator, KIP-890) and the markers all cross the
    cluster; confluent-kafka reads back the committed records only."""
    from broker.client.producer import Producer as OurProducer
    from broker.protocol.apis import FIND_COORDINATOR
    from tests.helpers.group_state import connect
    from tests.transactions.test_transactional_clients import _read

    topic, txn_id = fresh("our-txn-3"), fresh("our-txn-id")
    with OurProducer(cluster.bootstrap, transactional_id=txn_id, linger_ms=1) as producer:
        producer.init_transactions(60)
        with connect(cluster.brokers[0].bootstrap) as conn:
            found = conn.request(FIND_COORDINATOR, {"key": txn_id, "key_type": 1}, 2)
        assert found["error_code"] == 0, found
        coordinator = found["node_id"]
        a, b = [i for i in cluster.ids if i != coordinator]
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        assignment = [[a, b, coordinator], [b, a, coordinator]]  # leaders: a and b
        admin.create_topics([NewTopic(topic, 2, replica_assignment=assignment)])[topic].result(30)
        placed = wait_for(lambda: leaders(admin, topic), "leaders")
        assert {p: leader for p, (leader, _, _) in placed.items()} == {0: a, 1: b}

        producer.begin_transaction()
        for i in range(4):
            producer.send(topic, f"committed-{i}".encode(), partition=i % 2)
        producer.commit_transaction(60)
        producer.begin_transaction()
        for i in range(2):
            producer.send(topic, f"aborted-{i}".encode(), partition=i % 2)
        producer.flush(60)
        producer.abort_transaction(60)
    committed = sorted(m.value() for m in _read(cluster.bootstrap, topic, 2, 4, "read_committed"))
    assert committed == [f"committed-{i}".encode() for i in range(4)]
    everything = _read(cluster.bootstrap, topic, 2, 6, "read_uncommitted")
    assert len(everything) == 6
