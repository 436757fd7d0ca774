"""Transactions against a broker process: confluent-kafka's transactional producer
(commit, abort, zombie fencing), kafka-python's (commit, abort), and raw requests (Kafka's errors for bad input, the
transaction timeout's abort; transaction version 2 at Produce v12, TxnOffsetCommit v5 and EndTxn v5, which
none of these clients speaks), one broker shared by the module. It finalizes
`transaction.version` 2 (the default), so the clients are seen to keep to their older
protocol."""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from broker.processes import BrokerProcess
from broker.protocol.apis import (
    ADD_PARTITIONS_TO_TXN,
    API_VERSIONS,
    END_TXN,
    FETCH,
    FIND_COORDINATOR,
    INIT_PRODUCER_ID,
    OFFSET_FETCH,
    PRODUCE,
    TXN_OFFSET_COMMIT,
)
from broker.protocol.errors import ErrorCode as E
from broker.records.batch import iter_records
from tests.helpers import transactions as tx
from tests.helpers.cluster import wait_for
from tests.helpers.groups import partition_errors, txn_commit_body
from tests.helpers.server_requests import fetch_body, txn_records

SETTINGS = {
    "transaction.state.log.num.partitions": "4",
    "offsets.topic.num.partitions": "2",
    # The timeout duty looks often, so a short transaction timeout shows soon.
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "200",
    "num.partitions": "2",
}


@pytest.fixture(scope="module")
def txn_broker(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("txn-broker") / "logs", SETTINGS) as b:
        yield b


def _producer(bootstrap: str, txn_id: str, **extra) -> Producer:
    return Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": txn_id,
            "transaction.timeout.ms": 60000,
            **extra,
        }
    )


def _topic() -> str:
    return f"txn-{uuid.uuid4().hex[:8]}"


def test_commit_and_abort(txn_broker):
    topic = _topic()
    p = _producer(txn_broker.bootstrap, f"id-{topic}")
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(3):
        p.produce(topic, f"committed-{i}".encode(), partition=i % 2)
    p.commit_transaction(30)
    p.begin_transaction()
    for i in range(2):
        p.produce(topic, f"aborted-{i}".encode(), partition=i % 2)
    p.flush(30)
    p.abort_transaction(30)
    # A third transaction: the abort completed (its markers written), the id is usable.
    p.begin_transaction()
    p.produce(topic, b"committed-3", partition=0)
    p.commit_transaction(30)
    committed = [f"committed-{i}".encode() for i in range(4)]
    # A read_uncommitted consumer sees every data record (the markers are not records);
    # a read_committed one (librdkafka's default) skips the aborted ones.
    values = sorted(m.value() for m in _read(txn_broker.bootstrap, topic, 2, 6, "read_uncommitted"))
    assert values == [b"aborted-0", b"aborted-1", *committed]
    values = sorted(m.value() for m in _read(txn_broker.bootstrap, topic, 2, 4, "read_committed"))
    assert values == committed


def _read(bootstrap: str, topic: str, partitions: int, expected: int, isolation: str) -> list:
    """At least `expected` records and every partition's end, from offset 0."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "assign-only",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": isolation,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got, eofs = [], set()
    deadline = time.monotonic() + 30
    while (len(got) < expected or len(eofs) < partitions) and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is None:
            continue
        if msg.error():
            assert msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
            eofs.add(msg.partition())
            continue
        got.append(msg)
    consumer.close()
    return got


def test_a_second_producer_fences_the_first(txn_broker):
    topic = _topic()
    txn_id = f"id-{topic}"
    zombie = _producer(txn_broker.bootstrap, txn_id)
    zombie.init_transactions(30)
    zombie.begin_transaction()
    zombie.produce(topic, b"zombie", partition=0)
    zombie.flush(30)
    successor = _producer(txn_broker.bootstrap, txn_id)
    successor.init_transactions(30)  # aborts the zombie's transaction, bumps the epoch
    with pytest.raises(KafkaException) as raised:
        zombie.commit_transaction(30)
    assert raised.value.args[0].fatal(), raised.value
    successor.begin_transaction()
    successor.produce(topic, b"successor", partition=0)
    successor.commit_transaction(30)
    # The zombie's open transaction was aborted when the successor started.
    got = _read(txn_broker.bootstrap, topic, 1, 1, "read_committed")
    assert [m.value() for m in got] == [b"successor"]


def test_bad_input_and_the_transaction_timeout_with_raw_requests(txn_broker):
    address = txn_broker.bootstrap
    txn_id = f"raw-{uuid.uuid4().hex[:8]}"
    find = {"key": txn_id, "key_type": tx.TRANSACTION_KEY, "coordinator_keys": [txn_id]}
    wait_for(
        lambda: tx.raw_request(address, FIND_COORDINATOR, find)["error_code"] == 0, "coordinator"
    )
    init = tx.raw_request(address, INIT_PRODUCER_ID, tx.init_body(txn_id, timeout_ms=1000))
    assert init["error_code"] == 0
    pid, epoch = init["producer_id"], init["producer_epoch"]
    end = tx.raw_request(address, END_TXN, tx.end_body(txn_id, pid, epoch + 5, True))
    assert end["error_code"] == E.PRODUCER_FENCED
    end = tx.raw_request(address, END_TXN, tx.end_body(f"{txn_id}-unknown", pid, epoch, True))
    assert end["error_code"] == E.INVALID_PRODUCER_ID_MAPPING
    end = tx.raw_request(address, END_TXN, tx.end_body(txn_id, pid, epoch, True))
    assert end["error_code"] == E.INVALID_TXN_STATE  # no transaction open

    topic = tx.raw_created_topic(address, _topic())

    def add() -> int:
        body = tx.add_partitions_body(txn_id, pid, epoch, {topic: [0]})
        got = tx.raw_request(address, ADD_PARTITIONS_TO_TXN, body, version=3)  # a producer's
        return got["results_by_topic_v3_and_below"][0]["results_by_partition"][0][
            "partition_error_code"
        ]

    assert add() == 0
    # Past its 1 s timeout the coordinator aborts it under a bumped epoch: fenced.
    wait_for(lambda: add() == E.PRODUCER_FENCED, "the timed-out transaction aborted")


def test_kafka_python_commit_and_abort(txn_broker):
    from kafka import KafkaConsumer, KafkaProducer
    from kafka import TopicPartition as KTopicPartition

    topic = _topic()
    p = KafkaProducer(bootstrap_servers=txn_broker.bootstrap, transactional_id=f"id-{topic}")
    p.init_transactions()
    for value, commit in ((b"c1", True), (b"a1", False), (b"c2", True)):
        p.begin_transaction()
        p.send(topic, value, partition=0)
        if commit:
            p.commit_transaction()
        else:
            p.flush()
            p.abort_transaction()
    p.close()
    seen = {}
    for isolation, count in (("read_uncommitted", 3), ("read_committed", 2)):
        c = KafkaConsumer(bootstrap_servers=txn_broker.bootstrap, isolation_level=isolation)
        c.assign([KTopicPartition(topic, 0)])
        c.seek_to_beginning()
        values: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(values) < count and time.monotonic() < deadline:
            for records in c.poll(500).values():
                values.extend(r.value for r in records)
        c.close()
        seen[isolation] = values[:count]
    # In log order: the aborted record lies between the committed ones, so the first two
    # a read_committed consumer gets show it skipped.
    assert seen == {"read_uncommitted": [b"c1", b"a1", b"c2"], "read_committed": [b"c1", b"c2"]}


def test_transaction_version_2_with_raw_requests(txn_broker):
    """KIP-890 part 2 as a Kafka 4 producer speaks it: the feature finalized in
    ApiVersions; a Produce v12 opens the transaction at its partition without
    AddPartitionsToTxn (a v11 one is refused, part 1); EndTxn v5 bumps the epoch and
    names it, its retry is answered the same, the old epoch's batch and EndTxn are
    fenced; the commit is read by read_committed. TxnOffsetCommit v5 without
    AddOffsetsToTxn: the offsets committed with the transaction are fetched, the aborted
    ones never."""
    address = txn_broker.bootstrap
    versions = tx.raw_request(
        address,
        API_VERSIONS,
        {"client_software_name": "t", "client_software_version": "1"},
        version=3,
    )
    assert {"name": "transaction.version", "min_version": 0, "max_version": 2} in (
        versions["supported_features"]
    )
    assert {"name": "transaction.version", "max_version_level": 2, "min_version_level": 2} in (
        versions["finalized_features"]
    )
    txn_id = f"tv2-{uuid.uuid4().hex[:8]}"
    find = {"key": txn_id, "key_type": tx.TRANSACTION_KEY, "coordinator_keys": [txn_id]}
    wait_for(
        lambda: tx.raw_request(address, FIND_COORDINATOR, find)["error_code"] == 0, "coordinator"
    )
    init = tx.raw_request(address, INIT_PRODUCER_ID, tx.init_body(txn_id))
    pid, epoch = init["producer_id"], init["producer_epoch"]
    topic = tx.raw_created_topic(address, _topic())

    def produce(version: int, value: bytes, epoch: int, sequence: int = 0) -> dict:
        body = {
            "transactional_id": txn_id, "acks": -1, "timeout_ms": 5000,
            "topic_data": [{"name": topic, "partition_data": [{
                "index": 0, "records": txn_records(pid, value, epoch=epoch, sequence=sequence),
            }]}],
        }  # fmt: skip
        (p,) = tx.raw_request(address, PRODUCE, body, version)["responses"][0][
            "partition_responses"
        ]
        return p

    group = f"tv2-group-{topic}"
    find_group = {"key": group, "key_type": 0, "coordinator_keys": [group]}
    wait_for(
        lambda: tx.raw_request(address, FIND_COORDINATOR, find_group)["error_code"] == 0, "group"
    )

    def commit_offset(offset: int, epoch: int) -> dict:
        body = txn_commit_body(group, {(topic, 0): offset}, pid, epoch, transactional_id=txn_id)
        return partition_errors(tx.raw_request(address, TXN_OFFSET_COMMIT, body, version=5))

    def stable_offset() -> tuple[int, int]:
        body = {"group_id": group, "topics": [{"name": topic, "partition_indexes": [0]}]}
        answer = tx.raw_request(address, OFFSET_FETCH, {**body, "require_stable": True}, 7)
        (partition,) = answer["topics"][0]["partitions"]
        return partition["committed_offset"], partition["error_code"]

    assert produce(11, b"v11", epoch)["error_code"] == E.INVALID_TXN_STATE  # not added
    assert produce(12, b"one", epoch)["error_code"] == E.NONE
    # No AddOffsetsToTxn: the group's broker has its offsets partition added.
    assert commit_offset(1, epoch) == {(topic, 0): E.NONE}
    assert stable_offset()[1] == E.UNSTABLE_OFFSET_COMMIT  # pending in the transaction
    end = tx.raw_request(address, END_TXN, tx.end_body(txn_id, pid, epoch, True), version=5)
    assert (end["error_code"], end["producer_id"], end["producer_epoch"]) == (0, pid, epoch + 1)
    # The retry (the answer was lost): the same answer, once the markers are written.
    wait_for(
        lambda: (
            tx.raw_request(address, END_TXN, tx.end_body(txn_id, pid, epoch, True), version=5)
            == end
        ),
        "the retried EndTxn answered as the first",
    )
    # The marker carried the new epoch: a late batch of the old one is fenced.
    assert produce(12, b"late", epoch, sequence=1)["error_code"] == E.INVALID_PRODUCER_EPOCH
    wait_for(lambda: stable_offset() == (1, E.NONE), "the offset committed with the transaction")
    # The next transaction at the new epoch (sequences from 0), aborted.
    assert produce(12, b"two", epoch + 1)["error_code"] == E.NONE
    assert commit_offset(3, epoch + 1) == {(topic, 0): E.NONE}
    assert stable_offset()[1] == E.UNSTABLE_OFFSET_COMMIT
    aborted = tx.raw_request(
        address, END_TXN, tx.end_body(txn_id, pid, epoch + 1, False), version=5
    )
    assert (aborted["error_code"], aborted["producer_epoch"]) == (0, epoch + 2)
    stale = tx.raw_request(address, END_TXN, tx.end_body(txn_id, pid, epoch, True), version=5)
    assert stale["error_code"] == E.PRODUCER_FENCED

    def read_committed() -> tuple[list, list]:
        body = fetch_body(topic, 0, isolation_level=1)
        (part,) = tx.raw_request(address, FETCH, body, 11)["responses"][0]["partitions"]
        aborted = [(a["producer_id"], a["first_offset"]) for a in part["aborted_transactions"]]
        return [(r.offset, r.value) for r in iter_records(part["records"] or b"")], aborted

    # one@0, its marker@1, two@2 (aborted: the consumer skips it), its marker@3.
    wait_for(
        lambda: read_committed() == ([(0, b"one"), (2, b"two")], [(pid, 2)]),
        "the commit and the abort read_committed",
    )
    # The aborted offset is dropped once the marker is written (pending until then).
    wait_for(lambda: stable_offset() == (1, E.NONE), "the aborted offset never seen")
