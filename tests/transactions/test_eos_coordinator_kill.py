"""Exactly once through a crash of the transaction coordinator: on three brokers (RF=3,
min.insync.replicas=2) the copier (tests/transactions/eos_copier.py) runs while the broker
leading its `__transaction_state` partition is SIGKILLed with a transaction open; the
copier carries on with the new coordinator and the output read read_committed holds every
input record exactly once.

The group coordinator is kept on another broker (the group's name is chosen so). librdkafka
(2.10 to at least 2.16) cannot commit a transaction's offsets once the broker it cached as
the group coordinator left the cluster's metadata: it drops that broker's handle but keeps
waiting for it to come up, past send_offsets_to_transaction's timeout (its issues #5511 and
#5456; fixed upstream after 2.16). Real Kafka triggers the same. Groups whose coordinator
dies are tested with their own clients in tests/groups/ and tests/client/."""

from __future__ import annotations

import pytest

from broker.client.coordinator import TRANSACTION_KEY_TYPE
from broker.transactions.state_topic import TRANSACTION_STATE_TOPIC
from tests.helpers.cluster import (
    FAST_FAILOVER,
    coordinator_of,
    create_topic,
    group_coordinated_elsewhere,
    partition_state,
)
from tests.transactions.test_eos_application_kill import (
    PARTITIONS,
    TOTAL,
    Copier,
    assert_exactly_once,
    fill_input,
    names,
)

pytestmark = [pytest.mark.clients, pytest.mark.slow]


def test_the_coordinator_killed_mid_transaction_copies_each_record_once(cluster_factory):
    cluster = cluster_factory(
        3,
        overrides={
            **FAST_FAILOVER,
            # One state partition: its leader is the transaction coordinator. Three
            # offsets partitions, one led by each broker: the group picks another.
            "transaction.state.log.num.partitions": "1",
            "transaction.state.log.replication.factor": "3",
            "transaction.state.log.min.isr": "2",
            "offsets.topic.num.partitions": "3",
            "offsets.topic.replication.factor": "3",
            "group.initial.rebalance.delay.ms": "0",
            "min.insync.replicas": "2",
        },
    )
    bootstrap = cluster.bootstrap
    n = names()
    txn_coordinator = coordinator_of(bootstrap, n["txn_id"], TRANSACTION_KEY_TYPE)
    n["group"] = group_coordinated_elsewhere(bootstrap, n["group"], txn_coordinator)
    for topic in (n["input"], n["output"]):
        create_topic(cluster, topic, PARTITIONS, 3)
    fill_input(bootstrap, n["input"])
    copier = Copier(bootstrap, n)
    try:
        copier.until(copier.committed_at_least(TOTAL // 3))
        coordinator = partition_state(bootstrap, TRANSACTION_STATE_TOPIC, 0)[0]
        assert coordinator == txn_coordinator
        copier.until(lambda line: line.startswith("open "))
        cluster.kill(coordinator)
        survivor = next(i for i in cluster.ids if i != coordinator)
        survivor_bootstrap = cluster.broker(survivor).bootstrap
        copier.finish()
    finally:
        copier.close()
    moved = partition_state(survivor_bootstrap, TRANSACTION_STATE_TOPIC, 0)[0]
    assert moved not in (coordinator, -1)
    assert_exactly_once(survivor_bootstrap, n["output"])
