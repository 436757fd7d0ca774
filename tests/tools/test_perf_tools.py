"""kafka-producer-perf-test and kafka-consumer-perf-test against a broker process: the
lines Kafka's tools print, with counts and sizes that match what is in the log (no
timing is asserted), payload files, failures, --group. Bad arguments:
test_tool_arguments.py."""

from __future__ import annotations

import re

import pytest
from kafka import KafkaConsumer

from broker.client.admin import AdminClient, NewTopic
from broker.client.simple_consumer import SimpleConsumer
from broker.tools import consumer_perf
from broker.tools.__main__ import main as tools_main
from tests.helpers.group_clients import committed_offsets, fresh, topic_with_records

pytestmark = pytest.mark.clients

NUMBER = r"\d+(?:\.\d+)?"
FINAL = re.compile(
    rf"^(\d+) records sent, ({NUMBER}) records/sec \(({NUMBER}) MB/sec\), ({NUMBER}) ms avg "
    rf"latency, ({NUMBER}) ms max latency, (\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th, "
    r"(\d+) ms 99\.9th\.$"
)
DATE = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d:\d{3}"
CONSUMER_LINE = re.compile(
    rf"^({DATE}), ({DATE}), ({NUMBER}), ({NUMBER}), (\d+), ({NUMBER}), (\d+), (\d+), "
    rf"({NUMBER}), ({NUMBER})$"
)


@pytest.fixture(scope="module")
def broker(group_broker):
    return group_broker


def new_topic(bootstrap: str, partitions: int, **configs: str) -> str:
    topic = fresh("perf")
    with AdminClient(bootstrap) as admin:
        admin.create_topics([NewTopic(topic, partitions, configs=configs)], raise_errors=True)
    return topic


def log_sizes(bootstrap: str, topic: str, partitions: int) -> int:
    with SimpleConsumer(bootstrap) as consumer:
        return sum(consumer.latest_offset(topic, p) for p in range(partitions))


def run(capsys, *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = tools_main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_producer_perf_sends_and_reports(broker, capsys):
    topic = new_topic(broker.bootstrap, 3)
    code, out, err = run(
        capsys,
        *("producer-perf-test", "--topic", topic, "--num-records", "3000"),
        *("--record-size", "100", "--throughput", "-1"),
        *("--producer-props", f"bootstrap.servers={broker.bootstrap}", "acks=1", "linger.ms=2"),
    )
    assert code == 0, err
    final = FINAL.match(out.splitlines()[-1])
    assert final, out
    assert int(final[1]) == 3000
    p50, p95, p99, p999 = (int(final[i]) for i in range(6, 10))
    assert p50 <= p95 <= p99 <= p999 <= float(final[5])
    assert log_sizes(broker.bootstrap, topic, 3) == 3000
    # Kafka's payload: one random record of --record-size uppercase letters.
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=broker.bootstrap,
        auto_offset_reset="earliest",
        consumer_timeout_ms=10000,
    )
    value = next(iter(consumer)).value
    consumer.close()
    assert len(value) == 100 and re.fullmatch(rb"[A-Z]+", value)


def test_producer_perf_payload_file_and_throttle(broker, capsys, tmp_path):
    topic = new_topic(broker.bootstrap, 1)
    payloads = tmp_path / "payloads.txt"
    payloads.write_bytes(b"alpha|beta|gamma|")
    code, out, err = run(
        capsys,
        *("producer-perf-test", "--topic", topic, "--num-records", "60"),
        *("--payload-file", str(payloads), "--payload-delimiter", "|", "--throughput", "200"),
        *("--bootstrap-server", broker.bootstrap, "--producer-props", "compression.type=gzip"),
    )
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == f"Reading payloads from: {payloads}"
    assert lines[1] == "Number of messages read: 3"
    assert FINAL.match(lines[-1])[1] == "60"
    with SimpleConsumer(broker.bootstrap) as consumer:
        values = {r.value for r in consumer.fetch(topic, 0, 0, max_bytes=1 << 20).records()}
    assert values <= {b"alpha", b"beta", b"gamma"} and values


def test_producer_perf_reports_failed_records(broker, capsys):
    topic = new_topic(broker.bootstrap, 1, **{"max.message.bytes": "500"})
    code, out, err = run(
        capsys,
        *("producer-perf-test", "--topic", topic, "--num-records", "5"),
        *("--record-size", "2000", "--throughput", "-1"),
        *("--producer-props", f"bootstrap.servers={broker.bootstrap}", "linger.ms=0"),
    )
    assert code == 1
    assert FINAL.match(out.splitlines()[-1])[1] == "0"
    assert "Error: a record failed" in err and "MESSAGE_TOO_LARGE" in err


def test_consumer_perf_counts_what_the_topic_holds(broker, capsys):
    topic = topic_with_records(broker.bootstrap, [40, 35, 25], prefix="perf")
    size = sum(len(f"{p}-{i}") for p, n in enumerate([40, 35, 25]) for i in range(n))
    code, out, err = run(
        capsys,
        *("consumer-perf-test", "--bootstrap-server", broker.bootstrap, "--topic", topic),
        *("--messages", "100", "--timeout", "5000"),
    )
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == consumer_perf.HEADER
    line = CONSUMER_LINE.match(lines[1])
    assert line, out
    assert int(line[5]) == 100
    assert float(line[3]) == pytest.approx(size / 1024 / 1024, abs=1e-4)
    assert line[7] == "0"  # no group: no rebalance
    # Fewer records than asked for: Kafka's warning after --timeout, and what was read.
    code, out, err = run(
        capsys,
        *("consumer-perf-test", "--bootstrap-server", broker.bootstrap, "--topic", topic),
        *("--messages", "500", "--timeout", "1000", "--hide-header"),
    )
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith(
        "WARNING: Exiting before consuming the expected number of messages: timeout (1000 ms) "
        "exceeded."
    )
    assert CONSUMER_LINE.match(lines[1])[5] == "100"


def test_consumer_perf_as_a_group_member(broker, capsys):
    topic = topic_with_records(broker.bootstrap, [30, 20], prefix="perf")
    group = fresh("perf-group")
    code, out, err = run(
        capsys,
        *("consumer-perf-test", "--bootstrap-server", broker.bootstrap, "--topic", topic),
        *("--messages", "50", "--group", group, "--timeout", "20000"),
    )
    assert code == 0, err
    assert CONSUMER_LINE.match(out.splitlines()[1])[5] == "50"
    assert committed_offsets(broker.bootstrap, group) == {(topic, 0): 30, (topic, 1): 20}
