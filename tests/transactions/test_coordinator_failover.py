"""A transaction coordinator dies with a commit prepared but not complete: the new leader
of its `__transaction_state` partition loads it, sends the COMMIT marker again and
completes the transaction (docs/contracts/transactions.md, Timeouts, expiry, failover)."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from broker.records.batch import iter_batches
from broker.records.control import ControlType, parse_marker
from broker.transactions.state_topic import TRANSACTION_STATE_TOPIC
from tests.helpers.cluster import (
    FAST_FAILOVER,
    fresh,
    in_sync,
    leaders,
    log_bytes,
    partition_state,
    wait_for,
)

pytestmark = [pytest.mark.clients, pytest.mark.slow]


def _producer(bootstrap: str, txn_id: str) -> Producer:
    return Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": txn_id,
            "transaction.timeout.ms": 60000,
        }
    )


def _markers(cluster, broker_id: int, topic: str) -> list[tuple[ControlType, int]]:
    """(type, coordinator epoch) of each marker in the partition's log on `broker_id`."""
    data = log_bytes(cluster, broker_id, topic)
    return [
        tuple(parse_marker(data, pos, header))
        for pos, header in iter_batches(data)
        if header.is_control
    ]


def test_the_new_coordinator_completes_a_prepared_commit(cluster_factory):
    cluster = cluster_factory(
        3,
        overrides={
            **FAST_FAILOVER,
            "transaction.state.log.num.partitions": "1",
            "transaction.state.log.replication.factor": "3",
            # The last broker standing may write the completion alone.
            "transaction.state.log.min.isr": "1",
        },
    )
    bootstrap = cluster.bootstrap
    txn_id = fresh("failover-txn")
    producer = _producer(bootstrap, txn_id)
    producer.init_transactions(60)  # creates __transaction_state
    admin = AdminClient({"bootstrap.servers": bootstrap})
    coordinator = wait_for(lambda: in_sync(admin, TRANSACTION_STATE_TOPIC, 3), "state")[0][0]
    first_epoch = partition_state(bootstrap, TRANSACTION_STATE_TOPIC, 0)[1]
    # The data partition lives on one other broker alone: while it is down its marker
    # cannot be written, so the commit stays prepared.
    marked = next(i for i in cluster.ids if i != coordinator)
    survivor = next(i for i in cluster.ids if i not in (coordinator, marked))
    topic = fresh("failover-data")
    admin.create_topics([NewTopic(topic, 1, replica_assignment=[[marked]])])[topic].result(30)
    wait_for(lambda: leaders(admin, topic), f"{topic} led")

    producer.begin_transaction()
    producer.produce(topic, b"committed", partition=0)
    assert producer.flush(30) == 0
    cluster.kill(marked)
    producer.commit_transaction(60)  # PrepareCommit is written; the marker cannot be
    cluster.kill(coordinator)
    wait_for(
        lambda: (
            partition_state(cluster.broker(survivor).bootstrap, TRANSACTION_STATE_TOPIC, 0)[0]
            == survivor
        ),
        "the survivor leads the state partition",
    )
    cluster.restart(marked)
    # The survivor loaded the PrepareCommit and sends the marker once the leader is back;
    # until the transaction completes, InitProducerId answers CONCURRENT_TRANSACTIONS
    # (which the client retries), so a successor starting means it completed.
    successor = _producer(cluster.broker(survivor).bootstrap, txn_id)
    successor.init_transactions(60)
    # One COMMIT marker, sent by the new coordinator (a newer coordinator epoch).
    ((kind, coordinator_epoch),) = _markers(cluster, marked, topic)
    assert kind == ControlType.COMMIT and coordinator_epoch > first_epoch
    successor.begin_transaction()
    successor.produce(topic, b"next", partition=0)
    successor.commit_transaction(60)
