"""Fetch's size limits with real consumers (docs/contracts/fetch.md): librdkafka with a
small fetch.max.bytes and receive.message.max.bytes only 512 more (the setting that
broke a user: an answer past it drops the connection and the consumer never moves),
kafka-python and our group consumer with small fetch_max_bytes and
max_partition_fetch_bytes, over partitions holding many times those limits in batches
smaller and larger than each. Every answer is also measured on the wire."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, KafkaError, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer
from kafka import TopicPartition as KafkaTopicPartition

from broker.client.group import GroupConsumer
from tests.helpers.fetch_limits import load, read_all_raw

pytestmark = pytest.mark.clients

MAX_BYTES = 20_000  # fetch.max.bytes
PARTITION_MAX = 6_000  # max.partition.fetch.bytes
# Values (a batch is ~70 bytes more): mostly small, some over the partition's limit but
# under the answer's, partition 1 starting with one; no batch over MAX_BYTES, so that
# librdkafka's receive.message.max.bytes (MAX_BYTES + 512) holds for every answer.
WITHIN = {
    0: [1_200] * 12 + [9_000] + [1_200] * 12 + [9_000],
    1: [15_000] + [800] * 20 + [12_000] + [800] * 5,
    2: [2_500, 5_000, 7_000] * 8,
}
# For the clients without a response bound: batches over MAX_BYTES too (KIP-74).
BEYOND = {
    0: [1_200] * 10 + [30_000] + [1_200] * 10,
    1: [25_000, 500, 25_000] + [500] * 10,
    2: [4_000] * 10,
}
DEADLINE_S = 60


def _topic(bootstrap: str, name: str, layout: dict[int, list[int]]) -> dict[int, list[bytes]]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, num_partitions=len(layout), replication_factor=1)])[
        name
    ].result(10)
    host, port = bootstrap.split(":")
    return load(host, int(port), name, layout)


@pytest.fixture(scope="module")
def topics(broker):
    return {
        "within": ("limits-within", _topic(broker.bootstrap, "limits-within", WITHIN)),
        "beyond": ("limits-beyond", _topic(broker.bootstrap, "limits-beyond", BEYOND)),
    }


@pytest.mark.parametrize("which", ["within", "beyond"])
def test_every_answer_keeps_kafkas_limits_on_the_wire(broker, topics, which):
    name, sent = topics[which]
    host, port = broker.bootstrap.split(":")
    ends = {p: len(values) for p, values in sent.items()}
    frames = read_all_raw(host, int(port), name, ends, MAX_BYTES, PARTITION_MAX)
    biggest = max(max(sizes) for sizes in (WITHIN if which == "within" else BEYOND).values())
    if which == "within":
        # What librdkafka's receive.message.max.bytes = fetch.max.bytes + 512 allows.
        assert max(frames) <= MAX_BYTES + 512
    else:
        assert max(frames) > MAX_BYTES + 512  # the first-batch exception, once alone
        assert max(frames) <= biggest + 512
    assert len(frames) >= sum(len(v) for v in sent.values()) // 20


def test_librdkafka_with_a_tight_receive_limit_reads_everything_in_order(broker, topics):
    name, sent = topics["within"]
    problems: list[str] = []

    class Logs:
        def log(self, level, fmt, *args):
            text = fmt % args if args else fmt
            if "Invalid response size" in text or "receive.message.max.bytes" in text:
                problems.append(text)

    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "limits",
            "enable.auto.commit": False,
            "fetch.max.bytes": MAX_BYTES,
            "receive.message.max.bytes": MAX_BYTES + 512,
            "message.max.bytes": 10_000,  # librdkafka wants fetch.max.bytes >= this
            "max.partition.fetch.bytes": PARTITION_MAX,
            "error_cb": lambda err: problems.append(str(err)),
            "logger": Logs(),
        }
    )
    consumer.assign([TopicPartition(name, p, 0) for p in sent])
    got: dict[int, list[bytes]] = {p: [] for p in sent}
    deadline = time.monotonic() + DEADLINE_S
    try:
        while sum(map(len, got.values())) < sum(map(len, sent.values())) and not problems:
            assert time.monotonic() < deadline, {p: len(v) for p, v in got.items()}
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            assert not msg.error() or msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
            if not msg.error():
                assert msg.offset() == len(got[msg.partition()])
                got[msg.partition()].append(msg.value())
    finally:
        consumer.close()
    assert problems == []
    assert got == sent


def test_kafka_python_reads_batches_past_every_limit(broker, topics):
    name, sent = topics["beyond"]
    consumer = KafkaConsumer(
        bootstrap_servers=broker.bootstrap,
        fetch_max_bytes=MAX_BYTES,
        max_partition_fetch_bytes=PARTITION_MAX,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        consumer_timeout_ms=DEADLINE_S * 1000,
    )
    consumer.assign([KafkaTopicPartition(name, p) for p in sent])
    got: dict[int, list[bytes]] = {p: [] for p in sent}
    try:
        for msg in consumer:
            assert msg.offset == len(got[msg.partition])
            got[msg.partition].append(msg.value)
            if sum(map(len, got.values())) == sum(map(len, sent.values())):
                break
    finally:
        consumer.close()
    assert got == sent


def test_our_group_consumer_reads_batches_past_every_limit(broker, topics):
    name, sent = topics["beyond"]
    got: dict[int, list[bytes]] = {p: [] for p in sent}
    with GroupConsumer(
        broker.bootstrap,
        fetch_max_bytes=MAX_BYTES,
        max_partition_fetch_bytes=PARTITION_MAX,
        auto_offset_reset="earliest",
        fetch_max_wait_ms=100,
    ) as consumer:
        consumer.assign([(name, p) for p in sent])
        deadline = time.monotonic() + DEADLINE_S
        while sum(map(len, got.values())) < sum(map(len, sent.values())):
            assert time.monotonic() < deadline, {p: len(v) for p, v in got.items()}
            for record in consumer.poll(0.5):
                assert record.offset == len(got[record.partition])
                got[record.partition].append(record.value)
    assert got == sent
