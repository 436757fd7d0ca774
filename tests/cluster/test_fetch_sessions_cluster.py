"""Fetch sessions between real brokers: an idle follower's fetches name and answer no
partition, and one acks=all record costs its partition alone, whatever the topic's size
(counted at the leaders' /metrics, never timed)."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer

from broker.processes import free_port
from tests.helpers.cluster import create_topic, fresh, wait_for
from tests.helpers.metrics import scrape

pytestmark = [pytest.mark.clients]

PARTITIONS = 60
TALLIES = ("responses", "partitions_requested", "partitions_answered", "partition_reads")


def test_idle_followers_fetch_nothing_and_one_record_costs_one_partition(cluster_factory):
    ports = {i: free_port() for i in range(3)}
    cluster = cluster_factory(
        3, broker_overrides={i: {"metrics.port": str(port)} for i, port in ports.items()}
    )
    topic = fresh("sessions")
    create_topic(cluster, topic, PARTITIONS)

    def follower_fetches() -> dict[str, float]:
        """The followers' fetch tallies, summed over the three leaders."""
        totals = dict.fromkeys(TALLIES, 0.0)
        for port in ports.values():
            found = scrape(f"http://127.0.0.1:{port}/metrics")
            for name in TALLIES:
                totals[name] += found.value(f"kafka_fetch_{name}_total", fetcher="follower")
        return totals

    def quiet_window() -> dict[str, float] | None:
        """Tallies after every follower fetcher (six) answered twice with nothing named,
        nothing answered and nothing read; None if something moved meanwhile."""
        start = follower_fetches()
        wait_for(lambda: follower_fetches()["responses"] >= start["responses"] + 12, "idle fetches")
        end = follower_fetches()
        moved = any(end[name] != start[name] for name in TALLIES[1:])
        return None if moved else end

    # Once the high watermarks of the creation have reached the followers: idle is free.
    before = wait_for(quiet_window, "a quiet window of follower fetches")

    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    producer.produce(topic, value=b"one", partition=PARTITIONS // 2)
    assert producer.flush(30) == 0
    after = wait_for(quiet_window, "a quiet window after the record")
    # Each follower names that partition once (at its new offset) and hears of it at
    # most twice (the record, then the high watermark): 2 of 60 partitions, not 2 x 60.
    assert after["partitions_requested"] - before["partitions_requested"] == 2
    assert 2 <= after["partitions_answered"] - before["partitions_answered"] <= 4
    assert after["partition_reads"] - before["partition_reads"] <= 16
