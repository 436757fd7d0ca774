"""A follower catches up a backlog many times its fetch limits (docs/contracts/fetch.md):
small `replica.fetch.max.bytes` and `replica.fetch.response.max.bytes`, batches smaller
and larger than each, several partitions in one fetch session. It rejoins the ISR with
logs identical to the leader's."""

from __future__ import annotations

import pytest
from confluent_kafka.admin import AdminClient

from tests.helpers.cluster import create_topic, fresh, in_sync, leaders, log_bytes, wait_for
from tests.helpers.fetch_limits import load

pytestmark = [pytest.mark.clients, pytest.mark.slow]

PARTITION_MAX = 5_000
RESPONSE_MAX = 12_000
BACKLOG = {
    0: [1_000] * 30 + [20_000] + [1_000] * 30,  # one batch past both limits
    1: [7_000, 300] * 15,  # every other batch past the partition's limit
    2: [300] * 100,
}


def test_a_follower_catches_up_a_backlog_under_small_fetch_limits(cluster_factory):
    cluster = cluster_factory(
        2,
        overrides={
            "replica.fetch.max.bytes": str(PARTITION_MAX),
            "replica.fetch.response.max.bytes": str(RESPONSE_MAX),
        },
    )
    topic = fresh("limits")
    create_topic(cluster, topic, len(BACKLOG), factor=2)
    admin = AdminClient({"bootstrap.servers": cluster.broker(0).bootstrap})
    cluster.broker(1).stop()
    wait_for(
        lambda: (
            (found := leaders(admin, topic)) and all(lead == 0 for lead, _, _ in found.values())
        ),
        "broker 0 leading every partition",
    )
    host, port = cluster.broker(0).bootstrap.split(":")
    load(host, int(port), topic, BACKLOG)

    cluster.restart(1)
    wait_for(lambda: in_sync(admin, topic, 2), "the follower back in the ISR")
    for p in BACKLOG:
        leader, follower = log_bytes(cluster, 0, topic, p), log_bytes(cluster, 1, topic, p)
        assert follower == leader, p
