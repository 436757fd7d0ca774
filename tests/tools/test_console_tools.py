"""kafka-console-producer and kafka-console-consumer against a broker process: stdin to
stdout round trips through `python -m broker.tools` subprocesses, keys, headers and the
reader's and formatter's properties, cross-checked with kafka-python (what the console
producer wrote is what kafka-python reads, and the other way), the producer settings
reaching the batches, failed records and unreadable lines (exit 1), deserializer
errors with and without --skip-message-on-error, and --group's commits as kafka-python's
admin client sees them. Bad arguments: test_tool_arguments.py."""

from __future__ import annotations

import io
import select
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from kafka import KafkaConsumer, KafkaProducer

from broker.client.admin import AdminClient, NewTopic
from broker.client.simple_consumer import SimpleConsumer
from broker.records.batch import iter_batches
from broker.records.compression import CODEC_NAMES
from broker.tools import console_consumer
from tests.helpers.group_clients import committed_offsets, fresh

pytestmark = pytest.mark.clients

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def broker(group_broker):
    return group_broker


def new_topic(bootstrap: str, partitions: int = 1, **configs: str) -> str:
    topic = fresh("console")
    with AdminClient(bootstrap) as admin:
        admin.create_topics([NewTopic(topic, partitions, configs=configs)], raise_errors=True)
    return topic


def tool(*args: str, stdin: bytes = b"") -> subprocess.CompletedProcess:
    """`python -m broker.tools ARGS` with `stdin`; stdout and stderr captured as bytes."""
    return subprocess.run(
        [sys.executable, "-m", "broker.tools", *args],
        input=stdin,
        capture_output=True,
        cwd=ROOT,
        timeout=120,
    )


def produce(bootstrap: str, topic: str, lines: bytes, *options: str):
    return tool(
        "console-producer", "--bootstrap-server", bootstrap, "--topic", topic, *options, stdin=lines
    )


def consume(bootstrap: str, topic: str, *options: str):
    return tool("console-consumer", "--bootstrap-server", bootstrap, "--topic", topic, *options)


def consume_in_process(bootstrap: str, *options: str) -> tuple[int, bytes]:
    """console-consumer's main in this process: (exit code, what it wrote to stdout)."""
    stdout = io.BytesIO()
    code = console_consumer.main(["--bootstrap-server", bootstrap, *options], stdout=stdout)
    return code, stdout.getvalue()


def read_with_kafka_python(bootstrap: str, topic: str, count: int) -> list:
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        consumer_timeout_ms=10000,
    )
    try:
        records = []
        for record in consumer:
            records.append(record)
            if len(records) == count:
                break
        return sorted(records, key=lambda r: (r.partition, r.offset))
    finally:
        consumer.close()


# -- round trips -----------------------------------------------------------------------


def test_lines_round_trip_through_both_tools(broker):
    topic = new_topic(broker.bootstrap)
    lines = [f"line {i} with some text".encode() for i in range(20)] + ["ünïcode ✓".encode()]
    done = produce(broker.bootstrap, topic, b"\n".join(lines) + b"\n")
    assert done.returncode == 0, done.stderr
    read = consume(
        broker.bootstrap,
        topic,
        "--from-beginning",
        "--max-messages",
        str(len(lines)),
    )
    assert read.returncode == 0, read.stderr
    assert read.stdout.splitlines() == lines
    assert b"Processed a total of 21 messages" in read.stderr
    # kafka-python reads the same values, without keys or headers.
    records = read_with_kafka_python(broker.bootstrap, topic, len(lines))
    assert [r.value for r in records] == lines
    assert all(r.key is None and not r.headers for r in records)


def test_keys_and_headers_as_kafka_python_reads_them(broker):
    topic = new_topic(broker.bootstrap)
    lines = b"h1=a;h2=b|k1:v1\nh1=c|k2:v2:with:colons\nNULL|k3:NULL\nh=x;NULL-h=|NULL:v4\n"
    options = [
        *("--property", "parse.key=true", "--property", "key.separator=:"),
        *("--property", "parse.headers=true", "--property", "headers.delimiter=|"),
        *("--property", "headers.separator=;", "--property", "headers.key.separator=="),
        *("--property", "null.marker=NULL"),
    ]
    done = produce(broker.bootstrap, topic, lines, *options, "--sync")
    assert done.returncode == 0, done.stderr
    records = read_with_kafka_python(broker.bootstrap, topic, 4)
    assert [(r.key, r.value, r.headers) for r in records] == [
        (b"k1", b"v1", [("h1", b"a"), ("h2", b"b")]),
        (b"k2", b"v2:with:colons", [("h1", b"c")]),
        (b"k3", None, []),
        (None, b"v4", [("h", b"x"), ("NULL-h", b"")]),
    ]


def test_consumer_prints_what_kafka_python_wrote(broker):
    topic = new_topic(broker.bootstrap, partitions=2)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
    sent = [
        producer.send(
            topic,
            b"v0",
            key=b"k0",
            partition=0,
            headers=[("a", b"1"), ("b", b"2")],
            timestamp_ms=1000,
        ),
        producer.send(topic, None, key=b"k1", partition=0, timestamp_ms=2000),
        producer.send(topic, b"v2", partition=1, timestamp_ms=3000),
    ]
    producer.flush()
    for future in sent:
        future.get(timeout=30)
    producer.close()
    read = consume(
        broker.bootstrap,
        topic,
        "--partition",
        "0",
        "--offset",
        "earliest",
        "--max-messages",
        "2",
        *("--property", "print.key=true", "--property", "print.timestamp=true"),
        *("--property", "print.partition=true", "--property", "print.offset=true"),
        *("--property", "print.headers=true", "--property", "key.separator= | "),
        *("--property", "null.literal=<null>"),
    )
    assert read.returncode == 0, read.stderr
    assert read.stdout.decode().splitlines() == [
        "CreateTime:1000 | Partition:0 | Offset:0 | a:1,b:2 | k0 | v0",
        "CreateTime:2000 | Partition:0 | Offset:1 | NO_HEADERS | k1 | <null>",
    ]
    # A numeric --offset starts there; print.value=false ends the line after the key.
    code, out = consume_in_process(
        broker.bootstrap,
        *("--topic", topic, "--partition", "0", "--offset", "1", "--max-messages", "1"),
        *("--property", "print.key=true", "--property", "print.value=false"),
    )
    assert (code, out) == (0, b"k1\n")


def test_include_reads_every_matching_topic(broker, capsys):
    prefix = fresh("incl")
    topics = [f"{prefix}-a", f"{prefix}-b", f"other-{prefix}"]
    with AdminClient(broker.bootstrap) as admin:
        admin.create_topics([NewTopic(t, 2) for t in topics], raise_errors=True)
    for t in topics:
        assert produce(broker.bootstrap, t, f"{t} 1\n{t} 2\n".encode()).returncode == 0
    code, out = consume_in_process(
        broker.bootstrap, "--include", f"{prefix}-.*", "--from-beginning", "--timeout-ms", "2000"
    )
    assert code == 0
    assert sorted(out.splitlines()) == sorted(
        f"{t} {i}".encode() for t in topics[:2] for i in (1, 2)
    )
    err = capsys.readouterr().err
    assert "Processed a total of 4 messages" in err
    assert "TimeoutException" in err


def test_latest_by_default_and_sigterm_ends_with_the_count(broker):
    topic = new_topic(broker.bootstrap)
    assert produce(broker.bootstrap, topic, b"old\n").returncode == 0
    command = ["console-consumer", "--bootstrap-server", broker.bootstrap, "--topic", topic]
    consumer = subprocess.Popen(
        [sys.executable, "-m", "broker.tools", *command],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=ROOT,
    )
    try:
        # Its position is the log end when it starts: produce until it has printed.
        while not select.select([consumer.stdout], [], [], 0.5)[0]:
            assert consumer.poll() is None, consumer.stderr.read()
            assert produce(broker.bootstrap, topic, b"new\n").returncode == 0
        consumer.terminate()  # SIGTERM: stops as Ctrl-C does
        out, err = consumer.communicate(timeout=60)
    finally:
        consumer.kill()
    assert consumer.returncode == 0, err
    assert out.splitlines() and set(out.splitlines()) == {b"new"}
    assert f"Processed a total of {len(out.splitlines())} messages".encode() in err


# -- --group ------------------------------------------------------------------------------


def printed(out: bytes) -> list[tuple[int, int, bytes]]:
    """(partition, offset, value) of lines printed with print.partition and print.offset."""
    rows = []
    for line in out.splitlines():
        partition, offset, value = line.split(b"\t", 2)
        rows.append((int(partition.split(b":")[1]), int(offset.split(b":")[1]), value))
    return rows


def test_group_member_commits_what_it_printed(broker):
    topic = new_topic(broker.bootstrap, partitions=2)
    lines = b"".join(b"k%d:v%d\n" % (i, i) for i in range(10))
    assert (
        produce(
            broker.bootstrap,
            topic,
            lines,
            "--property",
            "parse.key=true",
            "--property",
            "key.separator=:",
        ).returncode
        == 0
    )
    group = fresh("console-group")
    member = [
        *("console-consumer", "--bootstrap-server", broker.bootstrap, "--topic", topic),
        *("--group", group, "--from-beginning"),
        *("--property", "print.partition=true", "--property", "print.offset=true"),
    ]
    first = tool(*member, "--max-messages", "4")
    assert first.returncode == 0, first.stderr
    rows = printed(first.stdout)
    assert len(rows) == 4
    expected = {}
    for partition, offset, _ in rows:
        expected[(topic, partition)] = max(expected.get((topic, partition), 0), offset + 1)
    # Committed: exactly past what was printed, not past what was fetched.
    assert committed_offsets(broker.bootstrap, group) == expected
    # The next member starts there, and from the start where nothing was committed (as
    # Kafka's: --from-beginning is the reset policy, committed offsets come first).
    second = tool(*member, "--max-messages", "6", "--timeout-ms", "20000")
    assert second.returncode == 0, second.stderr
    values = sorted(v for _, _, v in rows + printed(second.stdout))
    assert values == sorted(b"v%d" % i for i in range(10))
    assert sum(committed_offsets(broker.bootstrap, group).values()) == 10


# -- producer settings and failures ----------------------------------------------------


def batch_codecs(bootstrap: str, topic: str) -> set[int]:
    with SimpleConsumer(bootstrap) as consumer:
        result = consumer.fetch(topic, 0, 0)
    return {header.attributes & 0x07 for _, header in iter_batches(result.records_bytes)}


@pytest.mark.parametrize(
    "options, codec",
    [
        (["--compression-codec"], "gzip"),  # Kafka's: the option without a value is gzip
        (["--compression-codec", "lz4"], "lz4"),
        (["--producer-property", "compression.type=zstd", "--request-required-acks", "1"], "zstd"),
    ],
)
def test_producer_settings_reach_the_batches(broker, tmp_path, options, codec):
    topic = new_topic(broker.bootstrap)
    lines = b"".join(b"record %d " % i + b"x" * 200 + b"\n" for i in range(50))
    done = produce(broker.bootstrap, topic, lines, *options)
    assert done.returncode == 0, done.stderr
    assert batch_codecs(broker.bootstrap, topic) == {CODEC_NAMES[codec]}


def test_producer_config_file_and_overrides(broker, tmp_path):
    topic = new_topic(broker.bootstrap)
    config = tmp_path / "producer.properties"
    config.write_text("compression.type=snappy\nlinger.ms=0\n")
    done = produce(broker.bootstrap, topic, b"a\nb\n", "--producer.config", str(config))
    assert done.returncode == 0, done.stderr
    assert batch_codecs(broker.bootstrap, topic) == {CODEC_NAMES["snappy"]}
    # --producer-property overrides the file; an explicit option overrides both.
    topic = new_topic(broker.bootstrap)
    done = produce(
        broker.bootstrap,
        topic,
        b"a\n",
        "--producer.config",
        str(config),
        "--producer-property",
        "compression.type=gzip",
        "--compression-codec",
        "zstd",
    )
    assert done.returncode == 0, done.stderr
    assert batch_codecs(broker.bootstrap, topic) == {CODEC_NAMES["zstd"]}


@pytest.mark.parametrize("sync", [False, True])
def test_failed_record_exits_1_with_the_error(broker, sync):
    topic = new_topic(broker.bootstrap, **{"max.message.bytes": "200"})
    lines = b"small\n" + b"x" * 1000 + b"\n"
    done = produce(
        broker.bootstrap,
        topic,
        lines,
        "--producer-property",
        "linger.ms=0",
        *(["--sync"] if sync else []),
    )
    assert done.returncode == 1
    assert b"Error when sending message to topic " + topic.encode() in done.stderr
    assert b"value: 1000 bytes" in done.stderr
    assert b"with error: MESSAGE_TOO_LARGE" in done.stderr
    # Every line is either in the log or reported: without --sync both lines may have
    # travelled in the refused batch; with it the first was acknowledged on its own.
    reported = done.stderr.count(b"Error when sending message")
    kept = read_with_kafka_python(broker.bootstrap, topic, 1) if sync or reported == 1 else []
    assert len(kept) + reported == 2
    if sync:
        assert [r.value for r in kept] == [b"small"]


def test_unreadable_line_stops_the_producer_after_what_came_before(broker):
    topic = new_topic(broker.bootstrap)
    done = produce(
        broker.bootstrap,
        topic,
        b"k1:v1\nno separator\nk3:v3\n",
        "--property",
        "parse.key=true",
        "--property",
        "key.separator=:",
    )
    assert done.returncode == 1
    assert b"Error: No key separator found on line number 2: 'no separator'" in done.stderr
    assert [(r.key, r.value) for r in read_with_kafka_python(broker.bootstrap, topic, 1)] == [
        (b"k1", b"v1")
    ]
    # ignore.error: the line goes without a key instead.
    topic = new_topic(broker.bootstrap)
    done = produce(
        broker.bootstrap,
        topic,
        b"k1:v1\nno separator\n",
        "--property",
        "parse.key=true",
        "--property",
        "key.separator=:",
        "--property",
        "ignore.error=true",
    )
    assert done.returncode == 0, done.stderr
    records = read_with_kafka_python(broker.bootstrap, topic, 2)
    assert [(r.key, r.value) for r in records] == [(b"k1", b"v1"), (None, b"no separator")]


# -- deserializers and --skip-message-on-error ------------------------------------------


def test_deserializer_errors_skip_or_stop(broker, capsys):
    topic = new_topic(broker.bootstrap)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
    for value in (struct.pack(">i", 42), b"abc", struct.pack(">i", -7)):
        producer.send(topic, value).get(timeout=30)
    producer.close()
    options = [
        "--topic",
        topic,
        "--from-beginning",
        "--max-messages",
        "3",
        "--value-deserializer",
        "org.apache.kafka.common.serialization.IntegerDeserializer",
    ]
    capsys.readouterr()
    code, out = consume_in_process(broker.bootstrap, *options, "--skip-message-on-error")
    err = capsys.readouterr().err
    assert (code, out) == (0, b"42\n-7\n")
    assert "skipping this message: Size of data received by IntegerDeserializer is not 4" in err
    assert f"{topic}-0 offset 1" in err
    assert "Processed a total of 3 messages" in err
    code, out = consume_in_process(broker.bootstrap, *options)
    err = capsys.readouterr().err
    assert (code, out) == (1, b"42\n")
    assert "Error: Error processing message, terminating consumer process" in err
    assert "Processed a total of 2 messages" in err
