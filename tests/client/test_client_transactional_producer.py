"""Our client's transactional producer against a broker process: commits and aborts read
back by confluent-kafka at both isolation levels, offsets committed only with their
transaction, and a zombie fenced (docs/contracts/transactions.md, "Our client")."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Consumer, TopicPartition

from broker.client.producer import Producer
from broker.client.transaction import (
    TransactionFatalError,
    TransactionStateError,
    TxnState,
)
from broker.processes import BrokerProcess
from broker.protocol.errors import ErrorCode
from tests.transactions.test_transactional_clients import SETTINGS, _read


@pytest.fixture(scope="module")
def txn_broker(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("our-txn-broker") / "logs", SETTINGS) as b:
        yield b


def _producer(bootstrap: str, txn_id: str) -> Producer:
    return Producer(bootstrap, transactional_id=txn_id, linger_ms=1)


def test_commit_abort_and_offsets_read_back_by_confluent_kafka(txn_broker):
    topic = f"our-txn-{uuid.uuid4().hex[:8]}"
    group = f"g-{topic}"
    with _producer(txn_broker.bootstrap, f"id-{topic}") as p:
        with pytest.raises(TransactionStateError):
            p.send(topic, b"outside")  # before init_transactions
        p.init_transactions(30)
        assert p.transaction_state == TxnState.READY
        p.begin_transaction()
        futures = [p.send(topic, f"committed-{i}".encode(), partition=i % 2) for i in range(3)]
        p.send_offsets_to_transaction({(topic, 0): 3}, group)
        p.commit_transaction(30)
        assert all(f.result().offset >= 0 for f in futures)
        p.begin_transaction()
        for i in range(2):
            p.send(topic, f"aborted-{i}".encode(), partition=i % 2)
        p.flush(30)
        p.send_offsets_to_transaction({(topic, 0): 99}, group)
        p.abort_transaction(30)
        p.begin_transaction()
        p.send(topic, b"committed-3", partition=0)
        p.commit_transaction(30)
        p.begin_transaction()
        p.commit_transaction(30)  # an empty transaction commits without the coordinator
    committed = [f"committed-{i}".encode() for i in range(4)]
    values = sorted(m.value() for m in _read(txn_broker.bootstrap, topic, 2, 4, "read_committed"))
    assert values == committed
    values = sorted(m.value() for m in _read(txn_broker.bootstrap, topic, 2, 6, "read_uncommitted"))
    assert values == [b"aborted-0", b"aborted-1", *committed]
    # The committed transaction's offset counts, the aborted one's does not.
    consumer = Consumer({"bootstrap.servers": txn_broker.bootstrap, "group.id": group})
    (tp,) = consumer.committed([TopicPartition(topic, 0)], timeout=30)
    consumer.close()
    assert tp.offset == 3


def test_a_newer_producer_fences_ours(txn_broker):
    topic = f"our-txn-{uuid.uuid4().hex[:8]}"
    txn_id = f"id-{topic}"
    zombie = _producer(txn_broker.bootstrap, txn_id)
    zombie.init_transactions(30)
    zombie.begin_transaction()
    zombie.send(topic, b"zombie", partition=0).result(30)
    with _producer(txn_broker.bootstrap, txn_id) as successor:
        successor.init_transactions(30)  # aborts the zombie's transaction, bumps the epoch
        with pytest.raises(TransactionFatalError) as raised:
            zombie.commit_transaction(30)
        assert raised.value.code in (ErrorCode.PRODUCER_FENCED, ErrorCode.INVALID_PRODUCER_EPOCH)
        assert zombie.transaction_state == TxnState.FATAL_ERROR
        zombie.close(5)
        successor.begin_transaction()
        successor.send(topic, b"successor", partition=0)
        successor.commit_transaction(30)
    got = _read(txn_broker.bootstrap, topic, 1, 1, "read_committed")
    assert [m.value() for m in got] == [b"successor"]
