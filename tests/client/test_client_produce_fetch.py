"""Our producer and SimpleConsumer against our broker and librdkafka's mock cluster:
codecs, partitioning, leaders on several brokers, acks, idempotence, offsets."""

from __future__ import annotations

import threading
import time
import uuid

import pytest
from kafka.partitioner.default import DefaultPartitioner

from broker.client.producer import Producer, RecordMetadata
from broker.client.simple_consumer import FetchRequest, SimpleConsumer
from broker.protocol.apis import INIT_PRODUCER_ID, PRODUCE
from broker.protocol.errors import (
    ErrorCode,
    OffsetOutOfRangeError,
    UnknownTopicOrPartitionError,
)
from broker.records.batch import build_batch, iter_batches
from broker.records.compression import CODEC_NAMES
from broker.records.header import CODEC_NONE


@pytest.fixture(scope="module")
def consumer(kafka):
    with SimpleConsumer(kafka.bootstrap, timeout_s=10) as c:
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


def batch_headers(consumer: SimpleConsumer, topic: str, partition: int):
    """The header of every batch in the partition, fetching until the high watermark."""
    headers, offset = [], 0
    while offset < consumer.latest_offset(topic, partition):
        result = consumer.fetch(topic, partition, offset)
        headers += [h for _, h in iter_batches(result.records_bytes) if h.base_offset >= offset]
        offset = result.next_offset
    return headers


@pytest.mark.parametrize("codec", sorted(CODEC_NAMES))
def test_each_codec_round_trips_record_by_record(kafka, consumer, codec):
    topic = kafka.new_topic()
    sent = [
        (
            f"key-{i}".encode() if i % 3 else None,
            f"value-{i}-".encode() * (i % 7 + 1),
            1_700_000_000_000 + i,
        )
        for i in range(500)
    ]
    with Producer(kafka.bootstrap, compression=codec, linger_ms=20) as producer:
        futures = [
            producer.send(topic, v, key=k, partition=0, timestamp_ms=ts, headers=[("h", b"x")])
            for k, v, ts in sent
        ]
        producer.flush()
        metas = [f.result(timeout=10) for f in futures]
    assert [m.offset for m in metas] == list(range(500))

    result = consumer.fetch(topic, 0, 0)
    # The broker stores what we built: the codec is visible in the batch attributes.
    assert {h.codec for _, h in iter_batches(result.records_bytes)} == {CODEC_NAMES[codec]}
    records = read_all(consumer, topic, 0)
    assert [(r.key, r.value, r.timestamp) for r in records] == sent
    assert [r.offset for r in records] == list(range(500))
    assert all(r.headers == [("h", b"x")] for r in records)


def test_acknowledged_timestamp_is_the_create_time(kafka):
    kafka.lacks("CreateTime in Produce answers (it reports log_append_time_ms 1234)")
    topic = kafka.new_topic()
    with Producer(kafka.bootstrap) as producer:
        meta = producer.send(topic, b"v", partition=0, timestamp_ms=1_700_000_000_123).result(10)
    assert meta.timestamp == 1_700_000_000_123


def test_keyed_records_land_on_murmur2_partitions(kafka, consumer):
    partitions = 4
    topic = kafka.new_topic(partitions)
    keys = [f"user-{i}".encode() for i in range(200)]
    with Producer(kafka.bootstrap) as producer:
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


def test_null_keys_stick_to_a_partition_per_batch(kafka):
    topic = kafka.new_topic(4)
    with Producer(kafka.bootstrap, linger_ms=1000) as producer:
        futures = [producer.send(topic, b"x") for _ in range(50)]
        producer.flush()
        parts = {f.result().partition for f in futures}
    assert len(parts) == 1  # one lingering batch, one sticky partition


@pytest.mark.parametrize("codec", sorted(set(CODEC_NAMES) - {"none"}))
def test_reading_from_the_middle_of_a_compressed_batch(kafka, consumer, codec):
    topic = kafka.new_topic()
    # A long linger and a flush: the 100 records travel as one batch.
    with Producer(kafka.bootstrap, compression=codec, linger_ms=5000) as producer:
        for i in range(100):
            producer.send(topic, b"%d" % i, partition=0)
        producer.flush()
    result = consumer.fetch(topic, 0, 37)
    batches = list(iter_batches(result.records_bytes))
    assert len(batches) == 1 and batches[0][1].base_offset == 0  # the whole batch came back
    assert batches[0][1].codec == CODEC_NAMES[codec]
    records = list(result.records())
    assert [r.offset for r in records] == list(range(37, 100))
    assert [r.value for r in records] == [b"%d" % i for i in range(37, 100)]
    assert result.next_offset == 100


def test_fetch_many_across_partitions(kafka, consumer):
    topic = kafka.new_topic(3)
    # One batch per partition (the mock answers a fetch with one batch at most).
    with Producer(kafka.bootstrap, linger_ms=5000) as producer:
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


def test_partitions_led_by_different_brokers(kafka, consumer):
    """Metadata names a leader per partition; produce and fetch go to each leader."""
    topic = kafka.new_topic(4, spread=True)
    cluster = consumer.cluster
    cluster.refresh([topic])
    leaders = {p: cluster.leader_for(topic, p) for p in range(4)}
    assert set(leaders.values()) <= set(cluster.brokers)
    if kafka.mock is not None:  # three brokers: the leaders are spread over them
        assert len(set(leaders.values())) > 1, leaders
    with Producer(kafka.bootstrap, linger_ms=5000) as producer:
        futures = {
            p: [producer.send(topic, b"%d-%d" % (p, i), partition=p) for i in range(50)]
            for p in range(4)
        }
        producer.flush()
        assert {p: [f.result(10).offset for f in fs] for p, fs in futures.items()} == {
            p: list(range(50)) for p in range(4)
        }
    results = consumer.fetch_many([FetchRequest(topic, p, 10) for p in range(4)])
    for p in range(4):
        assert [r.value for r in results[(topic, p)].records()] == [
            b"%d-%d" % (p, i) for i in range(10, 50)
        ]
    # Each partition's leader answers ListOffsets; another broker would refuse it.
    assert [consumer.latest_offset(topic, p) for p in range(4)] == [50] * 4


def test_idempotent_batches_carry_the_producer_id_and_consecutive_sequences(kafka, consumer):
    topic = kafka.new_topic()
    with Producer(kafka.bootstrap, linger_ms=0, batch_size=200) as producer:
        for i in range(40):
            producer.send(topic, b"%03d" % i, partition=0)
        producer.flush()
    headers = batch_headers(consumer, topic, 0)
    assert len(headers) > 1
    assert {h.producer_id for h in headers} != {-1} and len({h.producer_id for h in headers}) == 1
    assert [h.base_sequence for h in headers] == [h.base_offset for h in headers]


def test_a_batch_sent_twice_is_appended_once(kafka, consumer):
    """What idempotence is for: a retry after a lost answer does not duplicate records."""
    kafka.lacks("duplicate detection for producers that are not transactional")
    topic = kafka.new_topic()
    cluster = consumer.cluster
    cluster.refresh([topic])
    conn = cluster.connection(cluster.leader_for(topic, 0))
    init = conn.request(
        INIT_PRODUCER_ID, {"transactional_id": None, "transaction_timeout_ms": 60000}
    )
    assert init["error_code"] == 0

    def produce(base_sequence: int, values: list[bytes]) -> dict:
        batch = build_batch(
            [(None, v, None, []) for v in values],
            CODEC_NONE,
            producer_id=init["producer_id"],
            producer_epoch=init["producer_epoch"],
            base_sequence=base_sequence,
        )
        body = {
            "transactional_id": None,
            "acks": -1,
            "timeout_ms": 10000,
            "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}],
        }
        (answer,) = conn.request(PRODUCE, body)["responses"][0]["partition_responses"]
        return answer

    first = produce(0, [b"a", b"b"])
    again = produce(0, [b"a", b"b"])
    assert first["error_code"] == 0 and first["base_offset"] == 0
    assert again["error_code"] in (ErrorCode.NONE, ErrorCode.DUPLICATE_SEQUENCE_NUMBER)
    gap = produce(5, [b"c"])
    assert gap["error_code"] == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert produce(2, [b"c"])["base_offset"] == 2
    assert [r.value for r in read_all(consumer, topic, 0)] == [b"a", b"b", b"c"]


def test_empty_fetch_at_the_high_watermark(kafka, consumer):
    topic = kafka.new_topic()
    with Producer(kafka.bootstrap) as producer:
        producer.send(topic, b"only", partition=0)
    result = consumer.fetch(topic, 0, 1, max_wait_ms=50)
    assert list(result.records()) == []
    assert result.next_offset == 1 and result.high_watermark == 1


def test_offsets_earliest_and_latest(kafka, consumer):
    topic = kafka.new_topic()
    assert consumer.earliest_offset(topic, 0) == 0
    assert consumer.latest_offset(topic, 0) == 0
    with Producer(kafka.bootstrap, linger_ms=0) as producer:
        for _ in range(3):
            producer.send(topic, b"v" * 10, partition=0).result(10)
    assert consumer.earliest_offset(topic, 0) == 0
    assert consumer.latest_offset(topic, 0) == 3


def test_offsets_by_time(kafka, consumer):
    kafka.lacks("ListOffsets by timestamp (it answers -1 for every time)")
    topic = kafka.new_topic()
    base = 1_600_000_000_000
    with Producer(kafka.bootstrap, linger_ms=0) as producer:
        for i in range(30):
            producer.send(topic, b"v", partition=0, timestamp_ms=base + 1000 * i).result(10)
    assert consumer.offsets_before(topic, 0, base) == 0
    assert consumer.offsets_before(topic, 0, base + 10_500) == 11
    assert consumer.offsets_before(topic, 0, base + 29_000) == 29
    assert consumer.offsets_before(topic, 0, base + 30_000) == -1


@pytest.mark.parametrize("acks", [0, 1, "all"])
def test_each_acks_setting_delivers_in_order(kafka, consumer, acks):
    topic = kafka.new_topic()
    with Producer(kafka.bootstrap, acks=acks, linger_ms=2, batch_size=500) as producer:
        futures = [producer.send(topic, b"%d" % i, partition=0) for i in range(100)]
        producer.flush()
        metas = [f.result(timeout=10) for f in futures]
    assert all(isinstance(m, RecordMetadata) and m.partition == 0 for m in metas)
    if acks == 0:  # no answer, so no offsets; the records arrive all the same
        assert all(m.offset == -1 for m in metas)
        deadline = time.monotonic() + 10
        while consumer.latest_offset(topic, 0) < 100 and time.monotonic() < deadline:
            time.sleep(0.05)
    else:
        assert [m.offset for m in metas] == list(range(100))
    assert [r.value for r in read_all(consumer, topic, 0)] == [b"%d" % i for i in range(100)]


def test_batch_size_splits_batches(kafka, consumer):
    topic = kafka.new_topic()
    with Producer(kafka.bootstrap, batch_size=2000, linger_ms=100) as producer:
        futures = [producer.send(topic, bytes(100), partition=0) for _ in range(100)]
        producer.flush()
        assert [f.result().offset for f in futures] == list(range(100))
    sizes = [h.size for h in batch_headers(consumer, topic, 0)]
    assert len(sizes) > 5 and max(sizes) <= 2000 + 61


def test_offset_out_of_range_raises_with_the_log_bounds(kafka, consumer):
    topic = kafka.new_topic()
    with Producer(kafka.bootstrap) as producer:
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


def test_unknown_partition_of_an_existing_topic(kafka, consumer):
    topic = kafka.new_topic(2)
    with pytest.raises(UnknownTopicOrPartitionError, match="partition 7"):
        consumer.fetch(topic, 7, 0)
    with Producer(kafka.bootstrap) as producer, pytest.raises(UnknownTopicOrPartitionError):
        producer.send(topic, b"v", partition=7)


def test_auto_created_topic_on_first_send(kafka, consumer):
    topic = f"auto-{uuid.uuid4().hex[:8]}"
    with Producer(kafka.bootstrap) as producer:
        meta = producer.send(topic, b"hello").result(timeout=10)
    assert consumer.fetch(topic, meta.partition, 0).records().__next__().value == b"hello"


def test_long_poll_fetch_returns_when_records_arrive(kafka, consumer):
    kafka.lacks("long polls woken by an append (it answers after max_wait_ms)")
    topic = kafka.new_topic()
    consumer.latest_offset(topic, 0)  # metadata and connection ready before timing

    def produce_later():
        time.sleep(0.3)
        with Producer(kafka.bootstrap) as producer:
            producer.send(topic, b"late", partition=0)

    writer = threading.Thread(target=produce_later)
    writer.start()
    started = time.monotonic()
    result = consumer.fetch(topic, 0, 0, max_wait_ms=5000, min_bytes=1)
    elapsed = time.monotonic() - started
    writer.join()
    assert [r.value for r in result.records()] == [b"late"]
    assert 0.2 < elapsed < 4.5  # woken by the append, not by max_wait


def test_fetched_records_stay_valid_while_later_fetches_reuse_buffers(kafka, consumer):
    """Records are views into the response frame; a buffer is reused only once no view of
    it is alive, so results kept across many fetches keep their bytes."""
    topic = kafka.new_topic()
    with Producer(kafka.bootstrap, linger_ms=0) as producer:
        for i in range(40):
            producer.send(topic, f"value-{i}".encode() * 50, partition=0).result(10)
    kept = [consumer.fetch(topic, 0, offset, max_bytes=1) for offset in range(40)]
    for _ in range(5):  # churn the buffer pool
        consumer.fetch(topic, 0, 0)
    for offset, result in enumerate(kept):
        first = next(iter(result.records()))
        assert first.offset == offset
        assert first.value == f"value-{offset}".encode() * 50
