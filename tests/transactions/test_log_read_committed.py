"""The log side of transactions against a real broker process, read by real clients:
transactional batches and markers written with raw requests (the coordinator's part is
tested elsewhere), then read by confluent-kafka, kafka-python and kcat in read_committed
and read_uncommitted; the aborted index and the open transaction after a SIGKILL."""

from __future__ import annotations

import shutil
import subprocess
import time

import pytest
from confluent_kafka import Consumer, KafkaError
from confluent_kafka import TopicPartition as CTopicPartition
from kafka import KafkaConsumer, TopicPartition

from broker.processes import BrokerProcess
from broker.protocol.apis import INIT_PRODUCER_ID
from tests.helpers.server_requests import (
    RAW_TXN_SETTINGS,
    Wire,
    create,
    produce,
    txn_records,
    values,
    write_marker,
)

TOPIC = "txn-log"
COMMITTED = [b"c0", b"b1", b"c1"]  # below the open transaction
EVERYTHING = [b"c0", b"a1", b"a2", b"b1", b"c1", b"open", b"c2"]
LSO = 7  # the open transaction's first offset


def producer_id(wire: Wire) -> int:
    """A producer id of its own (InitProducerId without a transactional id)."""
    answer = wire.call(INIT_PRODUCER_ID, 1, {"transactional_id": None, "transaction_timeout_ms": 0})
    assert answer["error_code"] == 0
    return answer["producer_id"]


@pytest.fixture(scope="module")
def txn_broker(tmp_path_factory):
    """One broker for the module, holding (offset: value) 0 c0, 1-2 a1 a2 (aborted, its
    ABORT at 3), 4 b1 (committed at 5), 6 c1, 7 open (a transaction left open), 8 c2."""
    with BrokerProcess(tmp_path_factory.mktemp("txn") / "logs", RAW_TXN_SETTINGS) as broker:
        wire = Wire(broker.bootstrap)
        create(wire, TOPIC)
        first, second = producer_id(wire), producer_id(wire)
        assert produce(wire, TOPIC, values(b"c0"))["base_offset"] == 0
        produce(wire, TOPIC, txn_records(first, b"a1", b"a2"))
        assert write_marker(wire, first, TOPIC, commit=False) == [0]
        produce(wire, TOPIC, txn_records(first, b"b1", sequence=2))
        assert write_marker(wire, first, TOPIC, commit=True) == [0]
        produce(wire, TOPIC, values(b"c1"))
        assert produce(wire, TOPIC, txn_records(second, b"open"))["base_offset"] == LSO
        produce(wire, TOPIC, values(b"c2"))
        broker.wire, broker.second = wire, second
        yield broker
        wire.close()


def _confluent(bootstrap: str, isolation: str, expected: int) -> tuple[list[bytes], int]:
    """Values from offset 0 until `expected` came, and the consumer's position then."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "txn-log",
            "enable.auto.commit": False,
            "isolation.level": isolation,
        }
    )
    consumer.assign([CTopicPartition(TOPIC, 0, 0)])
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(got) < expected and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and not msg.error():
            got.append(msg.value())
        elif msg is not None and msg.error().code() != KafkaError._PARTITION_EOF:
            raise AssertionError(msg.error())
    (position,) = consumer.position([CTopicPartition(TOPIC, 0)])
    consumer.close()
    return got, position.offset


def kafka_python(
    bootstrap: str, isolation: str, topic: str = TOPIC
) -> tuple[list[bytes], int, int]:
    """Every value it reads (it stops after 1.5 s without any), its position, and the end
    offset ListOffsets gives at that isolation level."""
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        enable_auto_commit=False,
        consumer_timeout_ms=1500,
        isolation_level=isolation,
    )
    tp = TopicPartition(topic, 0)
    consumer.assign([tp])
    consumer.seek_to_beginning()
    got = [m.value for m in consumer]
    position, end = consumer.position(tp), consumer.end_offsets([tp])[tp]
    consumer.close()
    return got, position, end


def test_confluent_read_committed_skips_aborted_and_stops_at_the_lso(txn_broker):
    got, position = _confluent(txn_broker.bootstrap, "read_committed", len(COMMITTED))
    assert (got, position) == (COMMITTED, LSO)
    got, _ = _confluent(txn_broker.bootstrap, "read_uncommitted", len(EVERYTHING))
    assert got == EVERYTHING


def test_kafka_python_read_committed_skips_aborted_and_stops_at_the_lso(txn_broker):
    assert kafka_python(txn_broker.bootstrap, "read_committed") == (COMMITTED, LSO, LSO)
    got, position, end = kafka_python(txn_broker.bootstrap, "read_uncommitted")
    assert (got, position, end) == (EVERYTHING, 9, 9)


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat not installed (./dev installs it)")
def test_kcat_read_committed(txn_broker):
    def kcat(isolation: str) -> list[bytes]:
        out = subprocess.run(
            ["kcat", "-b", txn_broker.bootstrap, "-C", "-t", TOPIC, "-p", "0", "-o",
             "beginning", "-e", "-q", "-X", f"isolation.level={isolation}"],
            capture_output=True, timeout=60, check=True,
        )  # fmt: skip
        return out.stdout.split()

    assert kcat("read_committed") == COMMITTED
    assert kcat("read_uncommitted") == EVERYTHING


def test_after_a_sigkill_the_aborted_index_and_the_open_transaction_come_back(txn_broker):
    """Last in the module: it restarts the shared broker."""
    txn_broker.wire.close()
    txn_broker.kill()
    txn_broker.start()
    wire = txn_broker.wire = Wire(txn_broker.bootstrap)
    assert kafka_python(txn_broker.bootstrap, "read_committed") == (COMMITTED, LSO, LSO)
    # Aborting the open transaction now lets read_committed readers past it, skipping it.
    assert write_marker(wire, txn_broker.second, TOPIC, commit=False) == [0]
    got, _ = _confluent(txn_broker.bootstrap, "read_committed", 4)
    assert got == [*COMMITTED, b"c2"]
    assert list((txn_broker.log_dir / f"{TOPIC}-0").glob("*.txnindex"))
