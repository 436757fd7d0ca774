"""Producer API semantics: futures, callbacks, flush, close, validation; and the CLI.

Against our broker and librdkafka's mock cluster (`kafka`), except where a broker is
stopped and started (ours only)."""

from __future__ import annotations

import concurrent.futures
import subprocess
import sys
import threading
import uuid

import pytest

from broker.client.admin import AdminClient, NewTopic
from broker.client.producer import Producer
from broker.client.simple_consumer import SimpleConsumer
from broker.processes import ROOT, free_port
from broker.protocol.errors import KafkaError, MessageTooLargeError, RequestTimedOutError


def new_topic(bootstrap: str, partitions: int = 1) -> str:
    """A topic on a broker of broker_factory (ours)."""
    name = f"p-{uuid.uuid4().hex[:10]}"
    with AdminClient(bootstrap) as admin:
        admin.create_topics([NewTopic(name, partitions)], raise_errors=True)
    return name


def test_futures_work_with_callbacks_wait_and_other_threads(kafka):
    topic = kafka.new_topic()
    seen = []
    with Producer(kafka.bootstrap, linger_ms=200) as producer:
        futures = [producer.send(topic, b"%d" % i, partition=0) for i in range(20)]
        futures[3].add_done_callback(lambda f: seen.append(f.result().offset))
        assert futures[5].cancel() is False
        waited = []
        waiter = threading.Thread(target=lambda: waited.append(futures[7].result(timeout=10)))
        waiter.start()
        done, not_done = concurrent.futures.wait(futures, timeout=10)
        waiter.join()
    assert not not_done and len(done) == 20
    assert seen == [3]
    assert waited[0].offset == 7
    futures[9].add_done_callback(lambda f: seen.append(f.result().offset))  # already done
    assert seen == [3, 9]


def test_flush_sends_without_waiting_for_linger(kafka):
    topic = kafka.new_topic()
    producer = Producer(kafka.bootstrap, linger_ms=60_000)
    try:
        future = producer.send(topic, b"v", partition=0)
        producer.flush(timeout=10)
        assert future.done() and future.result().offset == 0
    finally:
        producer.close()


def test_closed_producer_refuses_records_and_bad_arguments_are_refused(kafka):
    topic = kafka.new_topic()
    producer = Producer(kafka.bootstrap)
    with pytest.raises(TypeError):
        producer.send(topic, "not bytes")
    producer.close()
    producer.close()  # idempotent
    with pytest.raises(KafkaError, match="closed"):
        producer.send(topic, b"v")
    with pytest.raises(ValueError):
        Producer(kafka.bootstrap, compression="brotli")
    with pytest.raises(ValueError):
        Producer(kafka.bootstrap, acks=2)


def test_undeliverable_records_fail_after_the_delivery_timeout(broker_factory):
    b = broker_factory()
    topic = new_topic(b.bootstrap)
    producer = Producer(b.bootstrap, delivery_timeout_ms=1500, request_timeout_ms=1000)
    try:
        producer.send(topic, b"before", partition=0).result(timeout=10)
        b.stop()
        future = producer.send(topic, b"lost", partition=0)
        with pytest.raises(KafkaError) as info:
            future.result(timeout=20)
        assert info.value.retriable  # a connection or timeout error, surfaced after retries
    finally:
        producer.close(timeout=5)


def test_flush_timeout_raises(broker_factory):
    b = broker_factory()
    topic = new_topic(b.bootstrap)
    producer = Producer(b.bootstrap, request_timeout_ms=1000)
    try:
        producer.send(topic, b"before", partition=0).result(timeout=10)
        b.stop()
        producer.send(topic, b"stuck", partition=0)
        with pytest.raises(RequestTimedOutError):
            producer.flush(timeout=0.5)
    finally:
        producer.close(timeout=1)


def test_bootstrap_failure_is_a_connection_error():
    with pytest.raises(KafkaError, match="no broker answered Metadata"):
        SimpleConsumer(f"127.0.0.1:{free_port()}", timeout_s=1)


def cli(bootstrap: str, *args: str, stdin: bytes = b"") -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "broker.client.cli", "-b", bootstrap, *args],
        input=stdin,
        capture_output=True,
        cwd=ROOT,
        timeout=60,
    )


def test_cli_reads_and_writes(kafka):
    """The tools that read (topics list and describe, consume: a dump of fetches) and produce."""
    name = kafka.new_topic(2, prefix="cli")
    assert name in cli(kafka.bootstrap, "topics", "--list").stdout.decode().split()
    with AdminClient(kafka.bootstrap) as admin:
        (described,) = admin.describe_topics([name]).values()
    text = cli(kafka.bootstrap, "topics", "--describe", name).stdout.decode()
    assert f"partitions={len(described.partitions)}" in text
    for p in described.partitions:
        assert f"\t{p.partition}\tleader={p.leader}\treplicas={p.replicas}" in text

    lines = b"".join(b"k%d:line %d\n" % (i, i) for i in range(10))
    produced = cli(
        kafka.bootstrap, "produce", name, "--partition", "1", "--key-separator", ":", stdin=lines
    )
    assert produced.returncode == 0, produced.stderr
    everything = cli(kafka.bootstrap, "consume", name, "--partition", "1")
    assert everything.stdout.splitlines() == [b"line %d" % i for i in range(10)]
    some = cli(
        kafka.bootstrap,
        "consume",
        name,
        "--partition",
        "1",
        "--offset",
        "4",
        "--count",
        "2",
        "--verbose",
    )
    assert some.stdout.splitlines() == [b"4\tk4\tline 4", b"5\tk5\tline 5"]


def test_cli_creates_and_deletes_topics(kafka):
    kafka.lacks("CreateTopics and DeleteTopics")
    name = f"cli-{uuid.uuid4().hex[:8]}"
    assert cli(kafka.bootstrap, "topics", "--create", name, "--partitions", "2").returncode == 0
    assert "partitions=2" in cli(kafka.bootstrap, "topics", "--describe", name).stdout.decode()
    again = cli(kafka.bootstrap, "topics", "--create", name)
    assert again.returncode == 1 and b"TOPIC_ALREADY_EXISTS" in again.stderr
    assert cli(kafka.bootstrap, "topics", "--delete", name).returncode == 0
    assert name not in cli(kafka.bootstrap, "topics", "--list").stdout.decode().split()


def test_a_refused_batch_does_not_break_the_sequence_of_later_ones(kafka):
    """MESSAGE_TOO_LARGE fails only its own record; the idempotent sequence stays gap-free."""
    kafka.lacks("a maximum message size (it appends a batch of any size)")
    topic = kafka.new_topic()
    with Producer(kafka.bootstrap, linger_ms=0) as producer:
        assert producer.send(topic, b"first", partition=0).result(10).offset == 0
        too_big = producer.send(topic, bytes(2 * 1024 * 1024), partition=0)
        with pytest.raises(MessageTooLargeError):
            too_big.result(10)
        after = [producer.send(topic, b"after-%d" % i, partition=0) for i in range(5)]
        assert [f.result(10).offset for f in after] == [1, 2, 3, 4, 5]
    with SimpleConsumer(kafka.bootstrap) as consumer:
        values = [r.value for r in consumer.fetch(topic, 0, 0).records()]
    assert values == [b"first"] + [b"after-%d" % i for i in range(5)]


def test_buffer_memory_applies_backpressure(broker_factory):
    b = broker_factory()
    topic = new_topic(b.bootstrap, 2)
    with Producer(b.bootstrap, buffer_memory=5_000, linger_ms=50, max_block_ms=2000) as producer:
        futures = [producer.send(topic, bytes(100)) for _ in range(500)]  # blocks, then proceeds
        assert producer._buffered <= 5_000 + 200
        producer.flush(timeout=10)
        assert all(f.result().offset >= 0 for f in futures)
        assert {f.result().partition for f in futures} == {0, 1}  # sticky moved on per batch
        b.stop()
        with pytest.raises(RequestTimedOutError, match="buffer_memory"):
            for _ in range(100):
                producer.send(topic, bytes(100))
        b.start()
