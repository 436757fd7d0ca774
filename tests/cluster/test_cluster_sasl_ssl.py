"""A cluster whose only listener is SASL_SSL: the brokers register it, the controller and
the replica fetchers reach each other over TLS with SCRAM-SHA-512 (each broker's own
credentials from its JAAS config), topics replicate and survive their leader's stop, and
clients see the SASL_SSL endpoints in Metadata."""

from __future__ import annotations

import json
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from broker.processes import kazoo_session
from broker.zk.layout import BROKER_IDS, decode_broker
from tests.helpers.cluster import FAST_FAILOVER, fresh, in_sync, leaders, wait_for
from tests.helpers.secure_cluster import SCRAM, sasl_ssl_cluster

pytestmark = pytest.mark.slow

PASSWORDS = {"broker": "inter-broker-pw-1", "alice": "alice-client-pw-2"}


@pytest.fixture
def sasl_cluster(zookeeper, tmp_path):
    cluster, ca = sasl_ssl_cluster(tmp_path, zookeeper, PASSWORDS, FAST_FAILOVER)
    # The test waits for the brokers with confluent-kafka, over SASL_SSL.
    cluster.start()
    client = {
        "bootstrap.servers": cluster.bootstrap,
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": SCRAM,
        "sasl.username": "alice",
        "sasl.password": PASSWORDS["alice"],
        "ssl.ca.location": str(ca.pem),
    }
    try:
        yield cluster, client
    finally:
        cluster.stop()


def _brokers_known(admin: AdminClient) -> bool:
    md = admin.list_topics(timeout=10)
    return md.controller_id >= 0 and len(md.brokers) == 3


def test_a_sasl_ssl_only_cluster_replicates(sasl_cluster):
    cluster, client = sasl_cluster
    admin = AdminClient(client)
    wait_for(lambda: _brokers_known(admin), "the controller's metadata at every broker")
    with kazoo_session(cluster.zookeeper_connect) as zk:
        registration = decode_broker(0, zk.get(f"{BROKER_IDS}/0")[0])
        raw = json.loads(zk.get(f"{BROKER_IDS}/0")[0])
    assert [(e.listener, e.security_protocol) for e in registration.endpoints] == [
        ("SECURE", "SASL_SSL")
    ]
    assert raw["listener_security_protocol_map"] == {"SECURE": "SASL_SSL"}
    assert raw["host"] is None and raw["port"] == -1  # Kafka's: no PLAINTEXT endpoint

    topic = fresh("secure")
    admin.create_topics([NewTopic(topic, 1, 3, config={"min.insync.replicas": "2"})])[topic].result(
        30
    )
    wait_for(lambda: in_sync(admin, topic, 3), f"{topic} in sync")
    producer = Producer({**client, "acks": "all", "enable.idempotence": True})
    for i in range(200):
        producer.produce(topic, f"v{i}".encode())
    assert producer.flush(30) == 0
    # Followers caught up over SASL_SSL: the ISR stays whole after the writes.
    wait_for(lambda: in_sync(admin, topic, 3), f"{topic} in sync after the writes")

    leader = leaders(admin, topic)[0][0]
    cluster.broker(leader).stop()
    moved = wait_for(
        lambda: (found := leaders(admin, topic)) and found[0][0] not in (leader, -1) and found,
        "a new leader",
    )
    assert moved[0][0] != leader
    consumer = Consumer({**client, "group.id": "g-" + topic, "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    got = []
    deadline = time.monotonic() + 60
    while len(got) < 200 and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and not msg.error():
            got.append(msg.value())
    consumer.close()
    assert got == [f"v{i}".encode() for i in range(200)]
    for b in cluster.brokers:
        text = b.log_text()
        assert all(password not in text for password in PASSWORDS.values())
