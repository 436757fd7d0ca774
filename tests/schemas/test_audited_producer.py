"""The audited producer against our broker and librdkafka's mock cluster (`kafka`), with
our registry (its log in `_schemas` on our broker; in memory with the mock, which cannot
create `_schemas`: it has no CreateTopics): the audit events published, read back with
our SimpleConsumer and decoded with our deserializer, add up exactly to what reached the
topics."""

from __future__ import annotations

import random
import threading
import time
import uuid
from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest

from broker.client.admin import AdminClient, NewTopic
from broker.client.simple_consumer import SimpleConsumer
from broker.protocol.errors import MessageTooLargeError
from broker.util.clock import SECOND_MS, now_ms
from schemas import catalog
from schemas.audited_producer import AuditedProducer, AuditPublishError
from schemas.client import RegistryClient
from schemas.serde import AvroDeserializer
from schemas.store import InMemoryStore, KafkaTopicStore, SchemaStore

WINDOW_MS = 1000
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
CLICK = catalog.load_str("ClickEvent")


class FakeClock:
    def __init__(self, now_ms: int) -> None:
        self.now_ms = now_ms

    def __call__(self) -> float:
        return self.now_ms / SECOND_MS


def as_ms(value: datetime | int) -> int:
    """timestamp-millis fields decode to datetimes; back to exact epoch ms."""
    if isinstance(value, int):
        return value
    return (value - EPOCH) // timedelta(milliseconds=1)


def fresh(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:8]}"


def schema_store(kafka) -> SchemaStore:
    """Where the registry keeps its log for a test on `kafka`."""
    if kafka.mock is not None:
        return InMemoryStore()
    return KafkaTopicStore(kafka.bootstrap, timeout_ms=10_000, init_timeout_ms=30_000)


def read_records(bootstrap: str, topic: str) -> list:
    """Every record of every partition of `topic`, up to its end offset now."""
    out = []
    with SimpleConsumer(bootstrap, timeout_s=10) as consumer:
        for partition in consumer.partitions_for(topic):
            offset = consumer.earliest_offset(topic, partition)
            end = consumer.latest_offset(topic, partition)
            while offset < end:
                result = consumer.fetch(topic, partition, offset)
                out += [r for r in result.records() if r.offset < end]
                offset = result.next_offset
    return out


def read_audit(bootstrap: str, url: str, audit_topic: str) -> list[dict]:
    with RegistryClient(url) as client:
        decode = AvroDeserializer(client)
        events = [decode(r.value, audit_topic) for r in read_records(bootstrap, audit_topic)]
    for event in events:
        event["window_start_ms"] = as_ms(event["window_start_ms"])
        event["emitted_at_ms"] = as_ms(event["emitted_at_ms"])
    return events


def summed(events: list[dict]) -> Counter:
    """What a consumer of the audit topic does: SUM counts per (topic, window)."""
    total: Counter = Counter()
    for event in events:
        total[(event["topic"], event["window_start_ms"])] += event["count"]
    return total


def wait_for(predicate, timeout: float = 15.0):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.1)


@pytest.fixture
def registry_url(kafka, registry_server):
    store = schema_store(kafka)
    with registry_server(store) as url:
        yield url
    store.close()


def test_random_traffic_sums_exactly_per_topic_and_window(kafka, registry_url):
    audit = fresh("_audit")
    topics = [fresh("views"), fresh("searches"), fresh("clicks")]
    kafka.create_topics({audit: 2, **{t: 3 for t in topics}})
    started_ms = now_ms()
    # Ten whole windows in the past, then records stamped "now" by the producer.
    first_window = started_ms - started_ms % WINDOW_MS - 12 * WINDOW_MS
    futures = []
    lock = threading.Lock()

    producer = AuditedProducer(
        kafka.bootstrap,
        registry=registry_url,
        service="test-traffic",
        host="host-a",
        audit_topic=audit,
        window_ms=WINDOW_MS,
        grace_ms=0,  # past windows close at once: the emitter publishes during the run
        emit_interval_s=0.05,
        linger_ms=2,
    )

    def traffic(seed: int) -> None:
        rng = random.Random(seed)
        for i in range(1500):
            topic = rng.choice(topics)
            stamp = None
            if rng.random() < 0.8:
                stamp = first_window + rng.randrange(10 * WINDOW_MS)
            key = None if rng.random() < 0.5 else f"member-{rng.randrange(50)}".encode()
            if topic == topics[2]:
                record = {
                    "header": {
                        "time": stamp or started_ms,
                        "host": "host-a",
                        "service": "test-traffic",
                        "event_id": str(uuid.uuid4()),
                    },
                    "member_id": rng.randrange(1 << 40),
                    "page_key": "home",
                    "element_id": f"e{i}",
                    "target_url": None,
                    "position": rng.choice([None, rng.randrange(10)]),
                }
                future = producer.send_avro(topic, record, CLICK, key=key, timestamp_ms=stamp)
            else:
                future = producer.send(topic, rng.randbytes(rng.randrange(200)), key, None, stamp)
            with lock:
                futures.append((topic, future))
            if i % 300 == 0:
                time.sleep(0.1)  # let windows close and events go out mid-traffic

    threads = [threading.Thread(target=traffic, args=(seed,)) for seed in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    producer.close()

    # What reached the topics, per (topic, window), from the logs themselves.
    produced: Counter = Counter()
    for topic in topics:
        for record in read_records(kafka.bootstrap, topic):
            produced[(topic, record.timestamp - record.timestamp % WINDOW_MS)] += 1
    assert sum(produced.values()) == len(futures) == 4500
    if kafka.mock is None:  # the mock's acks carry log_append_time_ms 1234 instead
        by_future = Counter(
            (topic, f.result().timestamp - f.result().timestamp % WINDOW_MS) for topic, f in futures
        )
        assert by_future == produced
    assert len({w for _, w in produced}) >= 11  # ten past windows and the current one

    events = read_audit(kafka.bootstrap, registry_url, audit)
    assert summed(events) == produced
    # Past windows were published while traffic still went to them: several events each.
    assert len(events) > len(produced)
    for event in events:
        assert event["tier"] == "producer"
        assert (event["host"], event["service"]) == ("host-a", "test-traffic")
        assert event["window_ms"] == WINDOW_MS
        assert event["window_start_ms"] % WINDOW_MS == 0
        assert event["count"] > 0
        assert event["emitted_at_ms"] >= started_ms
    # Audit records are not audited.
    assert {e["topic"] for e in events} == set(topics)


def test_a_window_is_published_when_it_closes_before_close(kafka, registry_url):
    audit, topic = fresh("_audit"), fresh("events")
    kafka.create_topics({audit: 1, topic: 2})
    start = 1_700_000_000_000  # a window start (multiple of WINDOW_MS)
    clock = FakeClock(start + 100)
    producer = AuditedProducer(
        kafka.bootstrap,
        registry=registry_url,
        service="svc",
        host="h",
        audit_topic=audit,
        window_ms=WINDOW_MS,
        grace_ms=500,
        clock=clock,
        emit_interval_s=0.05,
    )
    try:
        for _ in range(7):
            future = producer.send(topic, b"v")  # stamped by the injected clock
        future.result(10)
        assert {r.timestamp for r in read_records(kafka.bootstrap, topic)} == {start + 100}
        clock.now_ms = start + WINDOW_MS + 400  # past the end, within the grace
        time.sleep(0.5)
        assert read_audit(kafka.bootstrap, registry_url, audit) == []

        clock.now_ms = start + WINDOW_MS + 500  # end + grace: the window is closed
        events = wait_for(lambda: read_audit(kafka.bootstrap, registry_url, audit))
        assert [(e["topic"], e["window_start_ms"], e["count"]) for e in events] == [
            (topic, start, 7)
        ]
        assert events[0]["emitted_at_ms"] == start + WINDOW_MS + 500

        # Records of the next (still open) window wait for close().
        producer.send(topic, b"w").result(10)
        time.sleep(0.3)
        assert len(read_audit(kafka.bootstrap, registry_url, audit)) == 1
    finally:
        producer.close()
    events = read_audit(kafka.bootstrap, registry_url, audit)
    assert summed(events) == {(topic, start): 7, (topic, start + WINDOW_MS): 1}


def test_late_records_are_published_in_an_additional_event(kafka, registry_url):
    audit, topic = fresh("_audit"), fresh("events")
    kafka.create_topics({audit: 1, topic: 1})
    start = 1_700_000_010_000
    clock = FakeClock(start + 10)
    producer = AuditedProducer(
        kafka.bootstrap,
        registry=registry_url,
        service="svc",
        audit_topic=audit,
        window_ms=WINDOW_MS,
        grace_ms=200,
        clock=clock,
        emit_interval_s=None,  # publish_closed_windows() by hand
    )
    try:
        for _ in range(5):
            producer.send(topic, b"on time")
        producer.producer.flush()
        assert producer.publish_closed_windows() == 0  # not closed yet
        clock.now_ms = start + WINDOW_MS + 200
        assert producer.publish_closed_windows() == 1
        assert producer.publish_closed_windows() == 0  # nothing new

        # Late: stamped inside the window after its event went out.
        producer.send(topic, b"late", timestamp_ms=start + 999)
        producer.send(topic, b"late", timestamp_ms=start)
        producer.producer.flush()
        assert producer.publish_closed_windows() == 1
    finally:
        producer.close()
    events = read_audit(kafka.bootstrap, registry_url, audit)
    assert [(e["window_start_ms"], e["count"]) for e in events] == [(start, 5), (start, 2)]
    assert summed(events) == {(topic, start): 7}
    assert producer.host  # defaults to this machine's name
    assert {e["host"] for e in events} == {producer.host}


def test_failed_sends_are_not_counted(kafka, registry_url):
    kafka.lacks("topic configs and a maximum message size")
    audit, topic = fresh("_audit"), fresh("small")
    with AdminClient(kafka.bootstrap) as admin:
        admin.create_topics(
            [NewTopic(audit, 1), NewTopic(topic, 1, configs={"max.message.bytes": "2000"})],
            raise_errors=True,
        )
    stamp = 1_700_000_020_000
    producer = AuditedProducer(
        kafka.bootstrap,
        registry=registry_url,
        service="svc",
        audit_topic=audit,
        window_ms=WINDOW_MS,
        emit_interval_s=None,
        batch_size=1500,  # the big record travels in a batch of its own
    )
    futures = [producer.send(topic, b"ok", timestamp_ms=stamp + i) for i in range(4)]
    too_large = producer.send(topic, b"x" * 5000, timestamp_ms=stamp + 5)
    futures += [producer.send(topic, b"ok", timestamp_ms=stamp + 6 + i) for i in range(3)]
    producer.close()
    with pytest.raises(MessageTooLargeError):
        too_large.result()
    assert all(f.result().offset >= 0 for f in futures)
    assert len(read_records(kafka.bootstrap, topic)) == 7
    assert summed(read_audit(kafka.bootstrap, registry_url, audit)) == {(topic, stamp): 7}


def test_counts_survive_an_unreachable_registry(kafka, registry_server):
    """The audit event cannot be serialized while the registry is down: flush says so
    and keeps the counts (so does the emitter, retrying), and the next flush once the
    registry is up publishes them."""
    audit, topic = fresh("_audit"), fresh("events")
    kafka.create_topics({audit: 1, topic: 1})
    store = schema_store(kafka)
    server = registry_server(store)  # its port is bound, nothing answers yet
    url = f"http://127.0.0.1:{server.port}"
    stamp = 1_700_000_030_000
    client = RegistryClient(url, timeout=2)
    producer = AuditedProducer(
        kafka.bootstrap,
        registry=client,
        service="svc",
        audit_topic=audit,
        window_ms=WINDOW_MS,
        grace_ms=0,
        emit_interval_s=0.05,  # tries (and fails) to publish the closed windows
    )
    try:
        for i in range(3):
            producer.send(topic, b"v", timestamp_ms=stamp + i)
        with pytest.raises(AuditPublishError):
            producer.flush()
        producer.send(topic, b"v", timestamp_ms=stamp + WINDOW_MS).result(10)
        time.sleep(0.3)  # the emitter fails meanwhile; that must not fail the next flush
        with server:
            producer.flush()
            events = read_audit(kafka.bootstrap, url, audit)
    finally:
        producer.close()
        client.close()
        store.close()
    assert summed(events) == {(topic, stamp): 3, (topic, stamp + WINDOW_MS): 1}
