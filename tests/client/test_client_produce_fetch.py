"""Our producer and SimpleConsumer against a real broker: codecs, partitioning, offsets."""

from __future__ import annotations

import threading
import time
import uuid

import pytest
from kafka.partitioner.default import DefaultPartitioner

from broker.client.admin import AdminClient, NewTopic
from broker.client.producer import Producer, RecordMetadata
from broker.client.simple_consumer import FetchRequest, SimpleConsumer
from broker.protocol.errors import OffsetOutOfRangeError, UnknownTopicOrPartitionError
from broker.records.batch import iter_batches
from broker.records.compression import CODEC_NAMES


def new_topic(bootstrap: str, partitions: int = 1) -> str:
    name = f"t-{uuid.uuid4().hex[:10]}"
    with AdminClient(bootstrap) as admin:
        admin.create_topics([NewTopic(name, partitions)], raise_errors=True)
    return name


@pytest.fixture(scope="module")
def consumer(broker):
    with SimpleConsumer(broker.bootstrap, timeout_s=10) as c:
        yield c


def read_all(consumer: SimpleConsumer, topic: str, partition: int, offset: int = 0):
    """Every record from `offset` to the high watermark, fetching in small steps."""
    out = []
    while True:
        result = consumer.fetch(topic, partition, offset, max_bytes=4096)
        out += list(result.records())
        if result.next_offset >= result.high_watermark:
            return out
        assert result.next_offset > offset, "a fetch below the high watermark made no progress"
        offset = result.next_offset


@pytest.mark.parametrize("codec", sorted(CODEC_NAMES))
def test_each_codec_round_trips_record_by_record(broker, consumer, codec):
    topic = new_topic(broker.bootstrap)
    sent = [
        (
            f"key-{i}".encode() if i % 3 else None,
            f"value-{i}-".encode() * (i % 7 + 1),
            1_700_000_000_000 + i,
        )
        for i in range(500)
    ]
    with Producer(broker.bootstrap, compression=codec, linger_ms=20) as producer:
        futures = [
            producer.send(topic, v, key=k, partition=0, timestamp_ms=ts, headers=[("h", b"x")])
            for k, v, ts in sent
        ]
        producer.flush()
        metas = [f.result(timeout=10) for f in futures]
    assert [m.offset for m in metas] == list(range(500))
    assert all(m.timestamp == ts for m, (_, _, ts) in zip(metas, sent, strict=True))

    result = consumer.fetch(topic, 0, 0)
    # The broker stores what we built: the codec is visible in the batch attributes.
    assert {h.codec for _, h in iter_batches(result.records_bytes)} == {CODEC_NAMES[codec]}
    records = read_all(consumer, topic, 0)
    assert [(r.key, r.value, r.timestamp) for r in records] == sent
    assert [r.offset for r in records] == list(range(500))
    assert all(r.headers == [("h", b"x")] for r in records)


def test_keyed_records_land_on_murmur2_partitions(broker, consumer):
    partitions = 6
    topic = new_topic(broker.bootstrap, partitions)
    keys = [f"user-{i}".encode() for i in range(200)]
    with Producer(broker.bootstrap) as producer:
        futures = [producer.send(topic, b"v", key=k) for k in keys]
        got = {k: f.result(timeout=10).partition for k, f in zip(keys, futures, strict=True)}

    class KafkaPythonCluster:  # the three calls DefaultPartitioner makes
        def topics(self):
            return {topic}

        def partitions_for_topic(self, _topic):
            return set(range(partitions))

        available_partitions_for_topic = partitions_for_topic

    reference = DefaultPartitioner()
    for key in keys:
        expected = reference.partition(topic, key, key, b"v", b"v", KafkaPythonCluster())
        assert got[key] == expected, key
    # And the broker agrees on where they are.
    for p in range(partitions):
        stored = {r.key for r in read_all(consumer, topic, p)}
        assert stored == {k for k in keys if got[k] == p}


def test_null_keys_stick_to_a_partition_per_batch(broker):
    topic = new_topic(broker.bootstrap, 4)
    with Producer(broker.bootstrap, linger_ms=1000) as producer:
        futures = [producer.send(topic, b"x") for _ in range(50)]
        producer.flush()
        parts = {f.result().partition for f in futures}
    assert len(parts) == 1  # one lingering batch, one sticky partition


def test_reading_from_the_middle_of_a_compressed_batch(broker, consumer):
    topic = new_topic(broker.bootstrap)
    with Producer(broker.bootstrap, compression="zstd", linger_ms=50) as producer:
        for i in range(100):
            producer.send(topic, b"%d" % i, partition=0)
        producer.flush()
    result = consumer.fetch(topic, 0, 37)
    batches = list(iter_batches(result.records_bytes))
    assert len(batches) == 1 and batches[0][1].base_offset == 0  # the whole batch came back
    records = list(result.records())
    assert [r.offset for r in records] == list(range(37, 100))
    assert [r.value for r in records] == [b"%d" % i for i in range(37, 100)]
    assert result.next_offset == 100


def test_fetch_many_across_partitions(broker, consumer):
    topic = new_topic(broker.bootstrap, 3)
    with Producer(broker.bootstrap) as producer:
        for p in range(3):
            for i in range(10 * (p + 1)):
                producer.send(topic, f"{p}:{i}".encode(), partition=p)
    results = consumer.fetch_many(
        [FetchRequest(topic, 0, 0), FetchRequest(topic, 1, 5), FetchRequest(topic, 2, 29)]
    )
    assert set(results) == {(topic, 0), (topic, 1), (topic, 2)}
    assert [r.value for r in results[(topic, 0)].records()] == [
        f"0:{i}".encode() for i in range(10)
    ]
    assert [r.offset for r in results[(topic, 1)].records()] == list(range(5, 20))
    assert [r.value for r in results[(topic, 2)].records()] == [b"2:29"]
    assert {k: r.high_watermark for k, r in results.items()} == {
        (topic, 0): 10,
        (topic, 1): 20,
        (topic, 2): 30,
    }


def test_empty_fetch_at_the_high_watermark(broker, consumer):
    topic = new_topic(broker.bootstrap)
    with Producer(broker.bootstrap) as producer:
        producer.send(topic, b"only", partition=0)
    result = consumer.fetch(topic, 0, 1, max_wait_ms=50)
    assert list(result.records()) == []
    assert result.next_offset == 1 and result.high_watermark == 1


def test_offsets_earliest_latest_and_by_time(broker, consumer):
    topic = new_topic(broker.bootstrap)
    assert consumer.earliest_offset(topic, 0) == 0
    assert consumer.latest_offset(topic, 0) == 0
    base = 1_600_000_000_000
    with Producer(broker.bootstrap, linger_ms=0) as producer:
        for i in range(30):
            producer.send(topic, b"v", partition=0, timestamp_ms=base + 1000 * i).result(10)
    assert consumer.earliest_offset(topic, 0) == 0
    assert consumer.latest_offset(topic, 0) == 30
    assert consumer.offsets_before(topic, 0, base) == 0
    assert consumer.offsets_before(topic, 0, base + 10_500) == 11
    assert consumer.offsets_before(topic, 0, base + 29_000) == 29
    assert consumer.offsets_before(topic, 0, base + 30_000) == -1


def test_acks_zero_resolves_without_offsets(broker, consumer):
    topic = new_topic(broker.bootstrap)
    with Producer(broker.bootstrap, acks=0) as producer:
        futures = [producer.send(topic, b"%d" % i, partition=0) for i in range(100)]
        producer.flush()
        metas = [f.result(timeout=10) for f in futures]
    assert all(isinstance(m, RecordMetadata) and m.offset == -1 for m in metas)
    deadline = time.monotonic() + 10
    while consumer.latest_offset(topic, 0) < 100 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert [r.value for r in read_all(consumer, topic, 0)] == [b"%d" % i for i in range(100)]


def test_batch_size_splits_batches(broker, consumer):
    topic = new_topic(broker.bootstrap)
    with Producer(broker.bootstrap, batch_size=2000, linger_ms=100) as producer:
        futures = [producer.send(topic, bytes(100), partition=0) for _ in range(100)]
        producer.flush()
        assert [f.result().offset for f in futures] == list(range(100))
    result = consumer.fetch(topic, 0, 0, max_bytes=10_000_000)
    sizes = [h.size for _, h in iter_batches(result.records_bytes)]
    assert len(sizes) > 5 and max(sizes) <= 2000 + 61


def test_offset_out_of_range_raises_with_the_log_bounds(broker, consumer):
    topic = new_topic(broker.bootstrap)
    with Producer(broker.bootstrap) as producer:
        for _ in range(5):
            producer.send(topic, b"v", partition=0)
    with pytest.raises(OffsetOutOfRangeError) as info:
        consumer.fetch(topic, 0, 50)
    assert info.value.log_start_offset == 0
    assert info.value.high_watermark == 5
    assert "OFFSET_OUT_OF_RANGE" in str(info.value)
    # fetch_many reports it instead of raising, so other partitions are not lost.
    result = consumer.fetch_many([FetchRequest(topic, 0, 50)])[(topic, 0)]
    assert result.error.name == "OFFSET_OUT_OF_RANGE"


def test_unknown_topic_with_auto_create_off(broker_factory):
    b = broker_factory({"auto.create.topics.enable": "false"})
    with SimpleConsumer(b.bootstrap, timeout_s=5) as consumer:
        with pytest.raises(UnknownTopicOrPartitionError, match="UNKNOWN_TOPIC_OR_PARTITION"):
            consumer.fetch("no-such-topic", 0, 0)
        with pytest.raises(UnknownTopicOrPartitionError):
            consumer.latest_offset("no-such-topic", 0)
    with Producer(b.bootstrap) as producer:
        with pytest.raises(UnknownTopicOrPartitionError):
            producer.send("no-such-topic", b"v")


def test_unknown_partition_of_an_existing_topic(broker, consumer):
    topic = new_topic(broker.bootstrap, 2)
    with pytest.raises(UnknownTopicOrPartitionError, match="partition 7"):
        consumer.fetch(topic, 7, 0)
    with Producer(broker.bootstrap) as producer, pytest.raises(UnknownTopicOrPartitionError):
        producer.send(topic, b"v", partition=7)


def test_auto_created_topic_on_first_send(broker, consumer):
    topic = f"auto-{uuid.uuid4().hex[:8]}"
    with Producer(broker.bootstrap) as producer:
        meta = producer.send(topic, b"hello").result(timeout=10)
    assert consumer.fetch(topic, meta.partition, 0).records().__next__().value == b"hello"


def test_long_poll_fetch_returns_when_records_arrive(broker, consumer):
    topic = new_topic(broker.bootstrap)
    consumer.latest_offset(topic, 0)  # metadata and connection ready before timing

    def produce_later():
        time.sleep(0.3)
        with Producer(broker.bootstrap) as producer:
            producer.send(topic, b"late", partition=0)

    writer = threading.Thread(target=produce_later)
    writer.start()
    started = time.monotonic()
    result = consumer.fetch(topic, 0, 0, max_wait_ms=5000, min_bytes=1)
    elapsed = time.monotonic() - started
    writer.join()
    assert [r.value for r in result.records()] == [b"late"]
    assert 0.2 < elapsed < 4.5  # woken by the append, not by max_wait


def test_fetched_records_stay_valid_while_later_fetches_reuse_buffers(broker, consumer):
    """Records are views into the response frame; a buffer is reused only once no view of
    it is alive, so results kept across many fetches keep their bytes."""
    topic = new_topic(broker.bootstrap)
    with Producer(broker.bootstrap, linger_ms=0) as producer:
        for i in range(40):
            producer.send(topic, f"value-{i}".encode() * 50, partition=0).result(10)
    kept = [consumer.fetch(topic, 0, offset, max_bytes=1) for offset in range(40)]
    for _ in range(5):  # churn the buffer pool
        consumer.fetch(topic, 0, 0)
    for offset, result in enumerate(kept):
        first = next(iter(result.records()))
        assert first.offset == offset
        assert first.value == f"value-{offset}".encode() * 50
