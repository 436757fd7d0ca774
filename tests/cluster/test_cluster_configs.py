"""Topic and broker configs in a cluster of broker processes: changed through unmodified
clients on any broker, stored in ZooKeeper as Kafka 2.x stores them, applied by every
broker without a restart (retention deletes old segments on each replica), read again by
a broker that restarts; bad input changes nothing."""

from __future__ import annotations

import json

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AlterConfigOpType, ResourceType
from kafka.admin import ConfigResource as KConfigResource
from kafka.admin import ConfigResourceType as KType

from broker.processes import Cluster, kazoo_session
from broker.zk import layout as z
from tests.helpers.cluster import fresh, wait_for
from tests.helpers.configs import (
    QUICK_RETENTION,
    RETAINED_BYTES,
    SEGMENT_BYTES,
    create,
    describe,
    everywhere,
    fill,
    incremental,
    kafka_python_admin,
    set_broker_default,
    topic_config_changes_through_both_clients,
    trimmed,
)

pytestmark = pytest.mark.clients


@pytest.fixture(scope="module")
def cluster(zookeeper, tmp_path_factory):
    """Three brokers on which retention runs often and deleted files go at once."""
    work = tmp_path_factory.mktemp("configs-cluster")
    with Cluster(work, 3, zookeeper=zookeeper, overrides=QUICK_RETENTION) as c:
        yield c


def log_dirs(cluster, ids=None) -> list:
    return [cluster.broker(i).log_dir for i in (ids if ids is not None else cluster.ids)]


def stored(cluster, path: str):
    """(data as JSON, or None) of a znode, and the config change notifications."""
    with kazoo_session(cluster.zookeeper_connect) as client:
        data = client.get(path)[0] if client.exists(path) else None
        changes = [
            json.loads(client.get(f"{z.CONFIG_CHANGES}/{name}")[0])
            for name in sorted(client.get_children(z.CONFIG_CHANGES))
        ]
    return (json.loads(data) if data else None), changes


def every_broker_has(cluster, key: str, value: str) -> bool:
    admin = kafka_python_admin(cluster.bootstrap)
    try:
        resources = [KConfigResource(KType.BROKER, str(i)) for i in cluster.ids]
        found = admin.describe_configs(resources, config_filter="all")["broker"]
    finally:
        admin.close()
    for i in cluster.ids:
        assert found[str(i)]["broker.id"]["read_only"] is True
        entry = found[str(i)][key]
        if (entry["value"], entry["config_source"]) != (value, "DYNAMIC_DEFAULT_BROKER_CONFIG"):
            return False
    return True


def test_topic_config_changes_reach_every_replica(cluster):
    topic = fresh("configs")
    topic_config_changes_through_both_clients(
        cluster.bootstrap, topic, log_dirs(cluster), [b.bootstrap for b in cluster.brokers]
    )
    config, changes = stored(cluster, z.topic_config_path(topic))
    assert config == {
        "version": 1,
        "config": {
            "segment.bytes": str(SEGMENT_BYTES),
            "retention.bytes": str(RETAINED_BYTES),
            "retention.ms": "86400000",
        },
    }
    assert {"version": 2, "entity_path": f"topics/{topic}"} in changes


def test_dynamic_broker_default_reaches_every_broker(cluster):
    topic = fresh("default")
    create(cluster.bootstrap, topic, 3, {"segment.bytes": str(SEGMENT_BYTES)})
    fill(cluster.bootstrap, topic)
    try:
        answer = set_broker_default(cluster.broker(0).bootstrap, "log.retention.bytes", "3000")
        assert answer["error_code"] == 0
        wait_for(lambda: trimmed(log_dirs(cluster), topic), "old segments deleted everywhere")
        # each broker follows the notification on its own: ask each (kafka-python sends a
        # broker's resource to that broker) until all have it
        wait_for(lambda: every_broker_has(cluster, "log.retention.bytes", "3000"), "applied")
        config, changes = stored(cluster, z.broker_config_path(z.DEFAULT_BROKER_ENTITY))
        assert config == {"version": 1, "config": {"log.retention.bytes": "3000"}}
        assert {"version": 2, "entity_path": "brokers/<default>"} in changes
    finally:
        assert set_broker_default(cluster.bootstrap, "log.retention.bytes", None)["error_code"] == 0
    addresses = [b.bootstrap for b in cluster.brokers]
    wait_for(lambda: everywhere(addresses, 2, topic, {"retention.bytes": ("-1", 5)}), "reset")


def test_bad_input_changes_nothing(cluster):
    topic = fresh("bad")
    create(cluster.bootstrap, topic, 3, {"retention.ms": "600000"})
    before = stored(cluster, z.topic_config_path(topic))
    with pytest.raises(KafkaException, match="segment.bytes"):
        incremental(
            cluster.bootstrap,
            ResourceType.TOPIC,
            topic,
            ("retention.ms", AlterConfigOpType.SET, "1"),
            ("segment.bytes", AlterConfigOpType.SET, "12"),
        )
    with pytest.raises(KafkaException, match="num.partitions"):
        incremental(
            cluster.bootstrap,
            ResourceType.BROKER,
            "1",
            ("num.partitions", AlterConfigOpType.SET, "9"),
        )
    with pytest.raises(KafkaException, match="UNKNOWN_TOPIC_OR_PART"):
        describe(cluster.bootstrap, ResourceType.TOPIC, fresh("missing"))
    assert stored(cluster, z.topic_config_path(topic)) == before
    assert describe(cluster.bootstrap, ResourceType.TOPIC, topic)["retention.ms"].value == "600000"


@pytest.mark.slow
def test_a_restarted_broker_reads_the_current_configs(cluster_factory):
    c = cluster_factory(3, overrides=QUICK_RETENTION)
    topic = fresh("restart")
    create(c.bootstrap, topic, 3, {"segment.bytes": str(SEGMENT_BYTES)})
    fill(c.bootstrap, topic)
    c.broker(2).stop()
    live = ",".join(c.broker(i).bootstrap for i in (0, 1))
    admin = kafka_python_admin(live)
    try:
        resource = KConfigResource(KType.TOPIC, topic, {"retention.bytes": str(RETAINED_BYTES)})
        assert admin.alter_configs([resource]) == {"topic": {topic: "OK"}}
    finally:
        admin.close()
    wait_for(lambda: trimmed(log_dirs(c, [0, 1]), topic), "trimmed on the live replicas")
    # a cluster-wide default written straight into ZooKeeper, as Kafka 2.x's
    # `kafka-configs --zookeeper` does
    with kazoo_session(c.zookeeper_connect) as client:
        client.create(
            z.broker_config_path(z.DEFAULT_BROKER_ENTITY),
            z.encode_topic_config({"message.max.bytes": "2000000"}),
            makepath=True,
        )
        client.create(
            f"{z.CONFIG_CHANGES}/{z.CONFIG_CHANGE_PREFIX}",
            z.encode_config_change("brokers/<default>"),
            sequence=True,
        )
    c.restart(2)
    wait_for(lambda: trimmed(log_dirs(c, [2]), topic), "trimmed on the restarted replica")
    admin = kafka_python_admin(c.bootstrap)
    try:
        resource = KConfigResource(KType.BROKER, "2")
        found = admin.describe_configs([resource], config_filter="all")["broker"]["2"]
    finally:
        admin.close()
    assert found["message.max.bytes"]["value"] == "2000000"
    assert found["message.max.bytes"]["config_source"] == "DYNAMIC_DEFAULT_BROKER_CONFIG"
