"""Exactly once through a crash of the transaction coordinator: on three brokers (RF=3,
min.insync.replicas=2) the copier (tests/transactions/eos_copier.py) runs while the broker
leading its `__transaction_state` partition is SIGKILLed with a transaction open; the
copier carries on with the new coordinator and the output read read_committed holds every
input record exactly once."""

from __future__ import annotations

import pytest

from broker.transactions.state_topic import TRANSACTION_STATE_TOPIC
from tests.helpers.cluster import FAST_FAILOVER, create_topic, partition_state
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
            # One state partition and one offsets partition: their leaders are the
            # transaction and group coordinators.
            "transaction.state.log.num.partitions": "1",
            "transaction.state.log.replication.factor": "3",
            "transaction.state.log.min.isr": "2",
            "offsets.topic.num.partitions": "1",
            "offsets.topic.replication.factor": "3",
            "group.initial.rebalance.delay.ms": "0",
            "min.insync.replicas": "2",
        },
    )
    bootstrap = cluster.bootstrap
    n = names()
    for topic in (n["input"], n["output"]):
        create_topic(cluster, topic, PARTITIONS, 3)
    fill_input(bootstrap, n["input"])
    copier = Copier(bootstrap, n)
    try:
        copier.until(copier.committed_at_least(TOTAL // 3))
        coordinator = partition_state(bootstrap, TRANSACTION_STATE_TOPIC, 0)[0]
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
