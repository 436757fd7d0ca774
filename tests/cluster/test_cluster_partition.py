"""A network partition: the leader of a partition cut off from ZooKeeper and from its
followers (but not from clients), every broker and ZooKeeper in a network namespace of
its own. A new leader is elected, the old one completes no acks=all write, nothing
acknowledged is lost, and once the network heals the old leader rejoins as a follower
with a log identical to the others'."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer

from broker.client.connection import BrokerConnection
from broker.protocol.apis import METADATA
from tests.helpers.cluster import create_topic, log_bytes, read_partition, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.clients]

SETTINGS = {
    "zookeeper.session.timeout.ms": "6000",
    "replica.lag.time.max.ms": "3000",
    "min.insync.replicas": "2",
}


def seen_by(broker, topic: str) -> tuple[int, list[int]] | None:
    """(leader, ISR) of partition 0 in this one broker's metadata (a client's metadata may
    come from any broker it knows, the cut-off one included, whose view is stale)."""
    conn = BrokerConnection(broker.host.address, broker.port, timeout_s=10)
    try:
        body = {"topics": [{"name": topic}], "allow_auto_topic_creation": False,
                "include_cluster_authorized_operations": False,
                "include_topic_authorized_operations": False}  # fmt: skip
        (t,) = conn.request(METADATA, body)["topics"]
    finally:
        conn.close()
    if t["error_code"] or not t["partitions"]:
        return None
    p = t["partitions"][0]
    return p["leader_id"], sorted(p["isr_nodes"])


def produce(bootstrap: str, values: list[bytes], **settings) -> list:
    """Each value's delivery error (None: acknowledged)."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", **settings})
    results: dict[bytes, object] = {}
    for value in values:
        producer.produce(
            "t", value=value, partition=0,
            on_delivery=lambda err, msg: results.__setitem__(msg.value(), err),
        )  # fmt: skip
    producer.flush(60)
    return [results.get(v, "not delivered") for v in values]


def test_a_leader_cut_off_loses_its_place_and_nothing_acknowledged(netns_cluster_factory, network):
    cluster = netns_cluster_factory(3, zookeeper_tick_ms=500, overrides=SETTINGS)
    old_leader = create_topic(cluster, "t")[0][0]
    followers = [b for b in cluster.ids if b != old_leader]
    before = [b"before-%d" % i for i in range(100)]
    assert produce(cluster.bootstrap, before) == [None] * 100

    network.partition(
        [cluster.hosts[old_leader]],
        [cluster.zookeeper.host, *(cluster.hosts[f] for f in followers)],
    )
    # Clients that still reach the old leader: their acks=all writes are never confirmed.
    stranded = [b"stranded-%d" % i for i in range(20)]
    outcomes = produce(
        cluster.broker(old_leader).bootstrap,
        stranded,
        **{"request.timeout.ms": 4000, "message.timeout.ms": 8000, "retries": 0},
    )
    assert all(outcome is not None for outcome in outcomes), outcomes

    # The rest of the cluster elects a new leader once the old one's session expires.
    wait_for(
        lambda: all((seen := seen_by(cluster.broker(f), "t")) and seen[0] in followers
                    for f in followers),
        "a new leader among the followers",
    )  # fmt: skip
    after = [b"after-%d" % i for i in range(100)]
    assert produce(",".join(cluster.broker(f).bootstrap for f in followers), after) == [None] * 100

    network.heal_all()
    # Asked of each broker: the old leader's own metadata was stale while it was cut off
    # (it still listed itself as leader with the old ISR).
    wait_for(
        lambda: all(
            (seen := seen_by(cluster.broker(b), "t"))
            and seen[0] != old_leader
            and seen[1] == cluster.ids
            for b in cluster.ids
        ),
        "the old leader back in the ISR, as a follower",
        90,
    )
    values = read_partition(cluster.bootstrap, "t")
    assert values == before + after  # nothing acknowledged lost, nothing stranded kept
    logs = [log_bytes(cluster, b, "t") for b in cluster.ids]
    assert logs[0] == logs[1] == logs[2]
    assert "ZooKeeper session expired" in cluster.broker(old_leader).log_text()
