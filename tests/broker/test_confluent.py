"""confluent-kafka (librdkafka), unmodified."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from broker.records.batch import iter_batches
from broker.records.compression import CODEC_NAMES
from tests.helpers.confluent import consume

pytestmark = pytest.mark.clients


def _create(bootstrap: str, topic: str, partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics(
        [NewTopic(topic, num_partitions=partitions, replication_factor=1)]
    )
    futures[topic].result(10)


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_producer_each_codec_consumer_assign(broker, codec):
    topic = f"ck-{codec}"
    _create(broker.bootstrap, topic, 2)
    producer = Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            "compression.codec": codec,
            "linger.ms": 5,
            "enable.idempotence": True,
        }
    )
    errors = []
    for i in range(1000):
        producer.produce(
            topic,
            key=f"key-{i % 13}",
            value=f"{codec}-{i}".encode(),
            on_delivery=lambda err, msg: errors.append(err) if err else None,
        )
        producer.poll(0)
    assert producer.flush(20) == 0
    assert errors == []
    got = consume(broker.bootstrap, topic, 2, 1000)
    assert sorted(m.value().decode() for m in got) == sorted(f"{codec}-{i}" for i in range(1000))
    # Per partition, offsets are dense.
    for p in (0, 1):
        offs = [m.offset() for m in got if m.partition() == p]
        assert offs == list(range(len(offs)))
    # The log keeps the producer's codec (librdkafka turns lz4 on only when the broker
    # advertises FindCoordinator: docs/contracts/wire-protocol.md).
    stored = {
        header.codec
        for segment in Path(broker.log_dir).glob(f"{topic}-*/*.log")
        for _, header in iter_batches(segment.read_bytes())
    }
    assert stored == {CODEC_NAMES[codec]}


def test_metadata_lists_broker_and_controller(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    md = admin.list_topics(timeout=10)
    assert list(md.brokers) == [0]
    assert md.controller_id == 0
    assert md.cluster_id


def test_offsets_for_times(broker):
    topic = "ck-times"
    _create(broker.bootstrap, topic)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    base = 1_700_000_000_000
    for i in range(10):
        producer.produce(topic, value=b"x", partition=0, timestamp=base + i * 1000)
        producer.flush(10)  # one batch per record, so time lookups are exact
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "times"})
    (tp,) = consumer.offsets_for_times([TopicPartition(topic, 0, base + 4500)], timeout=10)
    assert tp.offset == 5
    low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    assert (low, high) == (0, 10)
    consumer.close()


def _one_batch(bootstrap: str, topic: str, timestamps: list[int]) -> None:
    """Produce records with these timestamps in one batch (a long linger, one flush)."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 1000})
    for i, ts in enumerate(timestamps):
        producer.produce(topic, value=b"r%d" % i, partition=0, timestamp=ts)
    assert producer.flush(10) == 0


def test_offsets_for_times_answers_per_record_inside_a_batch(broker):
    """Regression: a lookup used to answer with the first offset of the batch holding the
    target, giving offsets_for_times users records older than they asked for."""
    topic = "ck-times-in-batch"
    _create(broker.bootstrap, topic)
    _one_batch(broker.bootstrap, topic, [1234, 999_999_999_999, 5])
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "times"})
    # One partition per call: librdkafka keeps one entry per partition in a request.
    for target, offset in ((999_999_999_999, 1), (1000, 0), (1234, 0), (1235, 1)):
        (tp,) = consumer.offsets_for_times([TopicPartition(topic, 0, target)], timeout=10)
        assert tp.offset == offset, target
    (none,) = consumer.offsets_for_times([TopicPartition(topic, 0, 1_000_000_000_000)], timeout=10)
    assert none.offset == -1  # no record that late: librdkafka's OFFSET_END
    consumer.close()


def test_admin_list_offsets_max_timestamp(broker):
    """ListOffsets -3 (KIP-734, v7): the record with the largest timestamp."""
    from confluent_kafka.admin import OffsetSpec

    topic = "ck-max-ts"
    _create(broker.bootstrap, topic)
    _one_batch(broker.bootstrap, topic, [1000, 9000, 5000])
    _one_batch(broker.bootstrap, topic, [3000, 9000])
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    tp = TopicPartition(topic, 0)
    futures = admin.list_offsets({tp: OffsetSpec.max_timestamp()}, request_timeout=10)
    info = futures[tp].result(10)
    assert (info.offset, info.timestamp) == (1, 9000)  # the first record holding it
    earliest = admin.list_offsets({tp: OffsetSpec.earliest()})[tp].result(10)
    latest = admin.list_offsets({tp: OffsetSpec.latest()})[tp].result(10)
    assert (earliest.offset, latest.offset) == (0, 5)


def test_consumer_past_the_log_end_resets_by_auto_offset_reset(broker):
    """Regression: a Fetch partition error (OFFSET_OUT_OF_RANGE) carried a null record
    set, which librdkafka reads as a corrupt response: the consumer never saw the error,
    never reset, and refetched in a tight loop getting nothing."""
    topic = "ck-out-of-range"
    _create(broker.bootstrap, topic)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(10):
        producer.produce(topic, value=b"m%d" % i, partition=0)
    assert producer.flush(10) == 0
    import time

    for reset in ("earliest", "latest"):
        consumer = Consumer(
            {
                "bootstrap.servers": broker.bootstrap,
                "group.id": f"oor-{reset}",
                "auto.offset.reset": reset,
                "enable.auto.commit": False,
            }
        )
        consumer.assign([TopicPartition(topic, 0, 1000)])  # past the end (10)
        got, deadline = [], time.monotonic() + 20
        while len(got) < 10 and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is None:
                if reset == "latest":  # records produced after the reset to the end
                    producer.produce(topic, value=b"new", partition=0)
                    producer.flush(10)
                continue
            assert not msg.error(), msg.error()
            got.append((msg.offset(), msg.value()))
        consumer.close()
        if reset == "earliest":
            assert got == [(i, b"m%d" % i) for i in range(10)]
        else:  # only records newer than the reset, none of the old ones
            assert len(got) == 10 and all(value == b"new" and offset >= 10 for offset, value in got)


def test_log_append_time_topic(broker):
    """message.timestamp.type=LogAppendTime: the broker's clock replaces the producer's,
    and consumers see it as a log-append timestamp."""
    from confluent_kafka import TIMESTAMP_LOG_APPEND_TIME

    topic = "ck-append-time"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    new = NewTopic(topic, 1, 1, config={"message.timestamp.type": "LogAppendTime"})
    admin.create_topics([new])[topic].result(10)
    import time

    before = int(time.time() * 1000)
    delivered = []
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 50})
    for _ in range(3):
        producer.produce(
            topic, value=b"x", partition=0, timestamp=1234,
            on_delivery=lambda err, msg: delivered.append((err, msg.timestamp())),
        )  # fmt: skip
    assert producer.flush(10) == 0
    after = int(time.time() * 1000)
    # The produce response carries the append time (log_append_time_ms).
    for err, (kind, ts) in delivered:
        assert err is None and kind == TIMESTAMP_LOG_APPEND_TIME and before <= ts <= after
    got = consume(broker.bootstrap, topic, 1, 3)
    for msg in got:
        kind, ts = msg.timestamp()
        assert kind == TIMESTAMP_LOG_APPEND_TIME and before <= ts <= after
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "t"})
    (tp,) = consumer.offsets_for_times([TopicPartition(topic, 0, 1234)], timeout=10)
    assert tp.offset == 0  # lookups use the append time (after 1234)
    consumer.close()
