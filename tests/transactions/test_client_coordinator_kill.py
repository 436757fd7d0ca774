"""Our client's transactional producer (broker/client/producer.py, decisions in
broker/client/transaction.py) through a SIGKILL of its transaction coordinator's broker
in a three-broker cluster: it finds the new coordinator and retries (NOT_COORDINATOR,
COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS, a dead connection), the open
transaction ends as a whole (committed, or aborted and known to be), the next one
commits, and confluent-kafka's read_committed consumer sees each committed record once
and nothing of an aborted one (docs/contracts/transactions.md)."""

from __future__ import annotations

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from broker.client.producer import Producer as OurProducer
from broker.client.transaction import TransactionAbortableError
from broker.protocol.apis import FIND_COORDINATOR
from tests.helpers.cluster import FAST_FAILOVER, fresh, leaders, wait_for
from tests.helpers.group_state import connect
from tests.transactions.test_transactional_clients import _read

pytestmark = [pytest.mark.clients, pytest.mark.slow]


def _coordinator(bootstrap: str, txn_id: str) -> int:
    with connect(bootstrap) as conn:
        found = conn.request(FIND_COORDINATOR, {"key": txn_id, "key_type": 1}, 2)
    assert found["error_code"] == 0, found
    return found["node_id"]


def test_a_transaction_open_when_its_coordinator_dies_ends_whole(cluster_factory):
    cluster = cluster_factory(
        3,
        overrides={
            **FAST_FAILOVER,
            "transaction.state.log.num.partitions": "1",
            "transaction.state.log.replication.factor": "3",
        },
    )
    bootstrap = cluster.bootstrap
    topic, txn_id = fresh("kill-coord"), fresh("kill-coord-id")
    with OurProducer(bootstrap, transactional_id=txn_id, linger_ms=1) as producer:
        producer.init_transactions(60)  # creates __transaction_state
        coordinator = _coordinator(cluster.brokers[0].bootstrap, txn_id)
        a, b = [i for i in cluster.ids if i != coordinator]
        # The data lives on the two survivors: only the coordinator moves.
        admin = AdminClient({"bootstrap.servers": bootstrap})
        assignment = [[a, b], [b, a]]
        admin.create_topics([NewTopic(topic, 2, replica_assignment=assignment)])[topic].result(30)
        wait_for(lambda: leaders(admin, topic), f"{topic} led")

        producer.begin_transaction()
        for i in range(4):
            producer.send(topic, f"open-{i}".encode(), partition=0)
        producer.flush(30)  # partition 0 is in the transaction, its records in the log
        cluster.kill(coordinator)
        # A partition new to the transaction: AddPartitionsToTxn must find the new
        # coordinator; then EndTxn too.
        for i in range(4, 8):
            producer.send(topic, f"open-{i}".encode(), partition=1)
        try:
            producer.commit_transaction(60)
            first = [f"open-{i}".encode() for i in range(8)]
        except TransactionAbortableError:
            producer.abort_transaction(60)
            first = []
        assert _coordinator(cluster.broker(a).bootstrap, txn_id) in (a, b)

        producer.begin_transaction()
        for i in range(4):
            producer.send(topic, f"next-{i}".encode(), partition=i % 2)
        producer.commit_transaction(60)
    expected = first + [f"next-{i}".encode() for i in range(4)]
    got = [m.value() for m in _read(bootstrap, topic, 2, len(expected), "read_committed")]
    assert sorted(got) == sorted(expected)  # each committed record once, nothing partial
