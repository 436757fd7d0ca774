"""compression.type and the CreateTime window with unmodified clients, on one broker
process: uncompressed producers' batches stored with the topic's codec (read back from
the segment with our dump-log tool) and read by every client; a Produce whose partitions
differ in timestamps answered per partition (docs/contracts/log.md, "Append validation")."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic, ResourceType
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from broker.client.connection import BrokerConnection
from broker.processes import ROOT
from broker.protocol.apis import PRODUCE
from broker.protocol.errors import ErrorCode
from broker.records.batch import build_batch
from tests.helpers.configs import create, describe, segments, set_broker_default
from tests.helpers.confluent import consume

pytestmark = pytest.mark.clients

COUNT = 40  # records per producer
HOUR_MS = 3_600_000


def codecs_in_log(log_dir, topic: str) -> set[str]:
    """The codec of every batch stored for `topic`-0, as dump-log prints them."""
    (segment,) = segments(log_dir, topic)
    out = subprocess.run(
        [sys.executable, "-m", "broker.tools", "dump-log", "--files", str(segment)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
    ).stdout
    return {
        line.split("compresscodec: ")[1].split()[0]
        for line in out.splitlines()
        if "compresscodec" in line
    }


def produce_uncompressed(bootstrap: str, topic: str) -> list[tuple[bytes, bytes]]:
    """COUNT records from confluent-kafka and COUNT from kafka-python, neither compressing,
    with keys and a header; returns (key, value) of all."""
    sent = []
    producer = Producer(
        {"bootstrap.servers": bootstrap, "compression.type": "none", "linger.ms": 5}
    )
    for i in range(COUNT):
        key, value = b"ck%d" % i, b"confluent %d " % i * 8
        producer.produce(topic, value, key, partition=0, headers=[("h", b"c")])
        sent.append((key, value))
    assert producer.flush(30) == 0
    kp = KafkaProducer(bootstrap_servers=bootstrap, compression_type=None, linger_ms=5)
    for i in range(COUNT):
        key, value = b"kk%d" % i, b"kafka-python %d " % i * 8
        kp.send(topic, value=value, key=key, partition=0, headers=[("h", b"k")])
        sent.append((key, value))
    kp.flush()
    kp.close()
    return sent


@pytest.mark.parametrize(
    "codec, config",
    [
        ("lz4", {"compression.type": "lz4"}),
        ("gzip", {"compression.type": "gzip", "compression.gzip.level": "9"}),
        ("zstd", {"compression.type": "zstd", "compression.zstd.level": "10"}),
    ],
)
def test_uncompressed_producers_are_stored_with_the_topic_codec(broker, codec, config):
    topic = f"codec-{codec}"
    create(broker.bootstrap, topic, 1, config)
    assert describe(broker.bootstrap, ResourceType.TOPIC, topic)["compression.type"].value == codec
    sent = produce_uncompressed(broker.bootstrap, topic)
    assert codecs_in_log(broker.log_dir, topic) == {codec}

    got = consume(broker.bootstrap, topic, 1, len(sent))
    assert [(m.key(), m.value()) for m in got] == sent
    assert [m.offset() for m in got] == list(range(len(sent)))
    assert {h for m in got for h in m.headers()} == {("h", b"c"), ("h", b"k")}

    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, consumer_timeout_ms=30000)
    consumer.assign([TopicPartition(topic, 0)])
    consumer.seek_to_beginning()
    # sent first: zip stops at its end instead of waiting for a record more
    read = [(m.key, m.value) for _, m in zip(sent, consumer, strict=False)]
    consumer.close()
    assert read == sent

    if shutil.which("kcat"):
        out = subprocess.run(
            ["kcat", "-b", broker.bootstrap, "-C", "-t", topic, "-p", "0", "-o", "beginning",
             "-e", "-f", "%k=%s\n"],
            capture_output=True, timeout=60, check=True,
        ).stdout  # fmt: skip
        assert out.splitlines() == [k + b"=" + v for k, v in sent]


def test_the_broker_codec_is_dynamic_and_producer_keeps_batches(broker):
    """A topic without an override follows the broker's compression.type, changed at run
    time; the default (producer) stores what the producer sent."""
    topic = "codec-broker"
    create(broker.bootstrap, topic, 1, {})
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, compression_type="gzip")
    first = b"as produced " * 20  # compressible: kafka-python sends it gzipped
    producer.send(topic, value=first, partition=0).get(timeout=30)
    assert codecs_in_log(broker.log_dir, topic) == {"gzip"}
    assert set_broker_default(broker.bootstrap, "compression.type", "snappy")["error_code"] == 0
    try:
        producer.send(topic, value=b"recompressed", partition=0).get(timeout=30)
    finally:
        set_broker_default(broker.bootstrap, "compression.type", None)
    producer.close()
    assert codecs_in_log(broker.log_dir, topic) == {"gzip", "snappy"}
    assert [m.value() for m in consume(broker.bootstrap, topic, 1, 2)] == [
        first,
        b"recompressed",
    ]


def test_create_time_outside_the_window_is_refused_per_partition(broker):
    topic = "window"
    config = {
        "message.timestamp.before.max.ms": str(HOUR_MS),
        "message.timestamp.after.max.ms": str(HOUR_MS),
    }
    create_two_partitions(broker.bootstrap, topic, config)
    now = int(time.time() * 1000)
    old = build_batch([(None, b"old", now - 2 * HOUR_MS, []), (None, b"ok", now, [])])
    fresh = build_batch([(None, b"fresh", now, [])])
    body = {
        "transactional_id": None, "acks": -1, "timeout_ms": 30000,
        "topic_data": [{"name": topic, "partition_data": [
            {"index": 0, "records": old}, {"index": 1, "records": fresh},
        ]}],
    }  # fmt: skip
    host, port = broker.bootstrap.rsplit(":", 1)
    connection = BrokerConnection(host, int(port))
    try:
        answer = connection.request(PRODUCE, body, version=8)
    finally:
        connection.close()
    parts = {p["index"]: p for p in answer["responses"][0]["partition_responses"]}
    assert parts[0]["error_code"] == ErrorCode.INVALID_TIMESTAMP
    assert (
        parts[0]["error_message"]
        == "One or more records have been rejected due to invalid timestamp"
    )
    assert [e["batch_index"] for e in parts[0]["record_errors"]] == [0]
    assert "is out of range" in parts[0]["record_errors"][0]["batch_index_error_message"]
    assert parts[1]["error_code"] == 0 and parts[1]["base_offset"] == 0
    got = consume(broker.bootstrap, topic, 2, 1)
    assert [(m.partition(), m.value()) for m in got] == [(1, b"fresh")]

    # librdkafka hears it as its own INVALID_TIMESTAMP for that message only.
    reports = []
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    producer.produce(topic, b"future", partition=0, timestamp=now + 2 * HOUR_MS,
                     on_delivery=lambda err, msg: reports.append(err))  # fmt: skip
    producer.produce(topic, b"now", partition=1, on_delivery=lambda err, msg: reports.append(err))
    assert producer.flush(30) == 0
    codes = sorted((e.code() if e else 0) for e in reports)
    assert codes == sorted([0, KafkaError.INVALID_TIMESTAMP])


def create_two_partitions(bootstrap: str, topic: str, config: dict[str, str]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 2, 1, config=config)])[topic].result(30)
