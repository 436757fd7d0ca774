"""The brokers' Prometheus endpoints in a cluster, scraped while a producer writes: the
leader counts what was acknowledged, under-replicated partitions rise when a follower is
killed and fall after it returns, one broker is the active controller (broker/metrics/)."""

from __future__ import annotations

import pytest

from broker.processes import free_port
from tests.helpers.cluster import FAST_FAILOVER, Traffic, create_topic, fresh, wait_for
from tests.helpers.metrics import scrape

pytestmark = [pytest.mark.slow, pytest.mark.clients]


def test_under_replicated_follows_a_killed_follower_and_its_return(cluster_factory):
    ports = {i: free_port() for i in range(3)}
    cluster = cluster_factory(
        3,
        overrides=FAST_FAILOVER,
        broker_overrides={i: {"metrics.port": str(port)} for i, port in ports.items()},
    )

    def metrics(broker_id: int):
        return scrape(f"http://127.0.0.1:{ports[broker_id]}/metrics")

    topic = fresh("metrics")
    placed = create_topic(cluster, topic)
    leader, replicas, _ = placed[0]
    follower = next(r for r in replicas if r != leader)
    assert sum(metrics(b).value("kafka_controller_active") for b in cluster.ids) == 1
    with Traffic(cluster.bootstrap, topic) as traffic:
        traffic.wait_acked(500)
        assert metrics(leader).value("kafka_under_replicated_partitions") == 0
        cluster.kill(follower)
        wait_for(
            lambda: metrics(leader).value("kafka_under_replicated_partitions") >= 1,
            "the leader to count the partition under-replicated",
        )
        assert metrics(leader).value("kafka_isr_shrinks_total") >= 1
        traffic.wait_acked(len(traffic.acked) + 500)  # acks=all with two in sync
        cluster.restart(follower)
        wait_for(
            lambda: metrics(leader).value("kafka_under_replicated_partitions") == 0,
            "the partition to be fully replicated again",
        )
        assert metrics(leader).value("kafka_isr_expands_total") >= 1
    # Idempotent acks=all: every acknowledged value was appended once on the leader
    # (retries of a batch already in the log are answered without an append).
    counted = metrics(leader).value("kafka_topic_messages_in_total", topic=topic)
    assert counted == len(traffic.acked)
    assert metrics(leader).value("kafka_leader_elections_total") >= 1
