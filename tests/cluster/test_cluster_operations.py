"""Running a cluster with Kafka's admin clients (kafka-python's and confluent-kafka's):
a reassignment under an acks=all producer, partitions added while producing, preferred
leaders given back after a broker returns, and what DescribeCluster / DescribeLogDirs
show. Tests that kill or move brokers own their cluster."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka import ElectionType, Producer
from confluent_kafka import TopicPartition as ConfluentPartition
from confluent_kafka.admin import AdminClient
from kafka import KafkaProducer
from kafka import TopicPartition as KafkaPythonPartition
from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient
from kafka.admin import NewTopic as KafkaPythonNewTopic
from kafka.errors import InvalidPartitionsError, InvalidReplicationAssignmentError

from broker.client.partitioner import partition_for_key
from tests.helpers.cluster import (
    FAST_FAILOVER,
    Traffic,
    create_topic,
    fresh,
    in_sync,
    leaders,
    read_partition,
    wait_for,
)
from tests.helpers.confluent import consume

pytestmark = [pytest.mark.clients]


def _kafka_python_admin(cluster) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=30000)


@pytest.mark.slow
def test_reassignment_under_an_acks_all_producer_loses_nothing(cluster_factory):
    cluster = cluster_factory(4, overrides=FAST_FAILOVER)
    topic = fresh("moving")
    confluent = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin = _kafka_python_admin(cluster)
    admin.create_topics(
        [
            KafkaPythonNewTopic(
                topic, num_partitions=-1, replication_factor=-1, replica_assignments={0: [0, 1]}
            )
        ]
    )
    wait_for(lambda: in_sync(confluent, topic, 2), f"{topic} in sync")
    tp = KafkaPythonPartition(topic, 0)
    try:
        # A plan naming a broker that does not exist is refused and changes nothing.
        refused = admin.alter_partition_reassignments({tp: [2, 9]})
        assert refused[tp] is InvalidReplicationAssignmentError
        assert admin.list_partition_reassignments() == {}
        with Traffic(cluster.bootstrap, topic) as traffic:
            traffic.wait_acked(500)
            assert admin.alter_partition_reassignments({tp: [2, 3]}) == {tp: None}
            moved = wait_for(
                lambda: (found := in_sync(confluent, topic, 2)) and found[0][1] == [2, 3] and found,
                "partition 0 on brokers 2 and 3",
            )
            assert moved[0][0] in (2, 3)
            assert admin.list_partition_reassignments() == {}
            done_at = len(traffic.acked)
            traffic.wait_acked(done_at + 500)  # on the new replicas
        assert not traffic.errors
        values = read_partition(cluster.bootstrap, topic)
        assert len(values) == len(set(values))  # idempotent: no duplicates
        assert set(traffic.acked) <= set(values)  # every acknowledged write is there
        # The old replicas deleted their copies.
        for broker_id in (0, 1):
            directory = Path(cluster.broker(broker_id).log_dir) / f"{topic}-0"
            wait_for(lambda d=directory: not d.exists(), f"{directory} deleted")
    finally:
        admin.close()


def test_partitions_added_while_producing_keep_keys_where_murmur2_puts_them(cluster):
    topic = fresh("growing")
    create_topic(cluster, topic, partitions=2)
    before = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all")
    admin = _kafka_python_admin(cluster)
    keys = [b"key-%d" % i for i in range(40)]
    try:
        for key in keys:
            before.send(topic, key=key, value=b"before")
        before.flush()
        admin.create_partitions({topic: 4})
        confluent = AdminClient({"bootstrap.servers": cluster.bootstrap})
        wait_for(
            lambda: (found := in_sync(confluent, topic, 3)) and len(found) == 4,
            "4 partitions in sync",
        )
        # A producer that knows 4 partitions (librdkafka's murmur2, Kafka's default).
        after = Producer(
            {"bootstrap.servers": cluster.bootstrap, "acks": "all", "partitioner": "murmur2"}
        )
        for key in keys:
            after.produce(topic, key=key, value=b"after")
        assert after.flush(30) == 0
        messages = consume(cluster.bootstrap, topic, 4, 2 * len(keys))
        assert len(messages) == 2 * len(keys)
        for message in messages:
            count = 2 if message.value() == b"before" else 4
            assert partition_for_key(message.key(), count) == message.partition()
        assert {m.partition() for m in messages} == {0, 1, 2, 3}
        # Fewer partitions than now is refused.

        with pytest.raises(InvalidPartitionsError):
            admin.create_partitions({topic: 3})
    finally:
        before.close()
        admin.close()


def test_describe_cluster_and_log_dirs(cluster):
    topic = fresh("described")
    create_topic(cluster, topic, partitions=1)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for i in range(100):
        producer.produce(topic, value=b"v%d" % i, partition=0)
    assert producer.flush(30) == 0
    confluent = AdminClient({"bootstrap.servers": cluster.bootstrap})
    described = confluent.describe_cluster().result(30)
    assert sorted(n.id for n in described.nodes) == [0, 1, 2]
    assert described.controller.id in (0, 1, 2)
    admin = _kafka_python_admin(cluster)
    try:
        theirs = admin.describe_cluster()
        assert theirs["cluster_id"] == described.cluster_id
        assert theirs["controller_id"] == described.controller.id
        dirs = admin.describe_log_dirs(topic_partitions={topic: [0]})
        sizes = {
            (answer["broker"], p["partition_index"]): p["partition_size"]
            for answer in dirs
            for result in answer["log_dirs"]
            for t in result["topics"]
            if t["name"] == topic
            for p in t["partitions"]
        }
        # Every broker holds a replica of the 100 records, the same number of bytes.
        assert len(sizes) == 3 and len(set(sizes.values())) == 1
        assert next(iter(sizes.values())) > 100
    finally:
        admin.close()


@pytest.mark.slow
def test_preferred_leaders_given_back_after_a_broker_returns(cluster_factory):
    cluster = cluster_factory(
        3, overrides={**FAST_FAILOVER, "auto.leader.rebalance.enable": "false"}
    )
    topic = fresh("preferred")
    confluent = AdminClient({"bootstrap.servers": cluster.bootstrap})
    placed = create_topic(cluster, topic, partitions=3)
    assert all(leader == replicas[0] for leader, replicas, _ in placed.values())
    cluster.kill(0)
    wait_for(
        lambda: (
            (found := leaders(confluent, topic))
            and all(leader != 0 for leader, _, _ in found.values())
        ),
        "leadership off broker 0",
    )
    cluster.restart(0)
    wait_for(lambda: in_sync(confluent, topic, 3), "broker 0 back in every ISR")
    moved = [p for p, (_, replicas, _) in placed.items() if replicas[0] == 0]
    assert moved and leaders(confluent, topic)[moved[0]][0] != 0  # not given back by itself
    # confluent-kafka asks for one partition, kafka-python for the rest.
    first, *rest = moved
    asked = [ConfluentPartition(topic, first)]
    answer = confluent.elect_leaders(ElectionType.PREFERRED, asked).result(30)
    assert all(error is None for error in answer.values()), answer
    admin = _kafka_python_admin(cluster)
    try:
        admin.elect_leaders(0, {topic: rest} if rest else None)
    finally:
        admin.close()
    wait_for(
        lambda: (
            (found := leaders(confluent, topic))
            and all(found[p][0] == found[p][1][0] for p in found)
        ),
        "every partition led by its preferred replica",
    )


@pytest.mark.slow
def test_a_throttled_reassignment_copies_slowly_until_the_throttle_is_lifted(cluster_factory):
    """A new replica throttled at 100 kB/s has, a few seconds in, nowhere near the 3 MB it
    copies in a moment unthrottled; once the throttle goes, the move completes."""
    cluster = cluster_factory(3, overrides={**FAST_FAILOVER, "replica.fetch.max.bytes": "65536"})
    topic = fresh("throttled")
    admin = _kafka_python_admin(cluster)
    confluent = AdminClient({"bootstrap.servers": cluster.bootstrap})
    try:
        admin.create_topics(
            [
                KafkaPythonNewTopic(
                    topic, num_partitions=-1, replication_factor=-1, replica_assignments={0: [0, 1]}
                )
            ]
        )
        wait_for(lambda: in_sync(confluent, topic, 2), f"{topic} in sync")
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
        for i in range(3000):
            producer.produce(topic, value=b"%04d" % i + b"x" * 996, partition=0)
            producer.poll(0)
        assert producer.flush(60) == 0
        admin.alter_configs(
            [
                ConfigResource(
                    ConfigResourceType.BROKER,
                    "2",
                    {"follower.replication.throttled.rate": "100000"},
                ),
                ConfigResource(
                    ConfigResourceType.TOPIC,
                    topic,
                    {"follower.replication.throttled.replicas": "0:2"},
                ),
            ]
        )
        tp = KafkaPythonPartition(topic, 0)
        assert admin.alter_partition_reassignments({tp: [0, 1, 2]}) == {tp: None}
        replica = Path(cluster.broker(2).log_dir) / f"{topic}-0"
        wait_for(replica.exists, "the new replica created")
        time.sleep(3)
        copied = sum(f.stat().st_size for f in replica.glob("*.log"))
        assert copied < 1_500_000, f"{copied} bytes copied in 3 s at 100 kB/s"
        assert KafkaPythonPartition(topic, 0) in admin.list_partition_reassignments()
        admin.alter_configs(
            [
                ConfigResource(
                    ConfigResourceType.TOPIC, topic, {"follower.replication.throttled.replicas": ""}
                )
            ]
        )
        wait_for(
            lambda: (found := in_sync(confluent, topic, 3)) and found[0][1] == [0, 1, 2],
            "the move done once the throttle is lifted",
        )
        assert admin.list_partition_reassignments() == {}
    finally:
        admin.close()
