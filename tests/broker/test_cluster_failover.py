"""Cluster failover bugs found by the client and load tests against a real cluster, each
reduced to its own test (ZooKeeper and three broker processes)."""

from __future__ import annotations

import pytest

from broker.client.admin import AdminClient, NewTopic
from broker.client.cluster import ClusterMetadata
from tests.client.test_client_cluster import ThreeBrokers, fully_replicated, wait_for


@pytest.mark.xfail(
    strict=True,
    reason="broker/controller/controller.py: a new controller keeps dead brokers in the ISR "
    "of partitions whose leader lives (Kafka's controller takes them out at failover)",
)
def test_a_new_controller_takes_dead_brokers_out_of_the_isrs(tmp_path, zk_connect):
    """The controller is killed. It followed partitions led by the other two brokers; the
    next controller must take it out of their ISRs, as it does for any broker that dies
    while a controller watches. Otherwise acks=all writes there wait for the dead broker
    until the leader gives up on it (replica.lag.time.max.ms, 30 s by default; never here).

    The same happens, one time in three under produce traffic, when the controller is
    stopped: its controlled shutdown takes it out of the ISRs, its last follower fetches
    put it back before it is gone, and the next controller leaves it there."""
    cluster = ThreeBrokers(tmp_path, zk_connect, {"replica.lag.time.max.ms": "600000"}).start()
    try:
        with AdminClient(cluster.bootstrap) as admin:
            admin.create_topics([NewTopic("failover", 3, 3)], raise_errors=True)
            controller = admin.cluster.controller_id
        wait_for(lambda: fully_replicated(cluster.bootstrap, "failover", 3), "ISR of 3")
        cluster.broker(controller).kill()
        survivor = next(b for i, b in enumerate(cluster.brokers) if i != controller)

        def dead_broker_out_of_every_isr() -> bool:
            with ClusterMetadata(survivor.bootstrap) as meta:
                meta.refresh(["failover"])
                parts = meta.topics["failover"].partitions.values()
                return meta.controller_id not in (-1, controller) and all(
                    controller not in p.isr and p.leader != controller for p in parts
                )

        wait_for(dead_broker_out_of_every_isr, "the dead controller out of the ISRs", 30)
    finally:
        cluster.stop()
