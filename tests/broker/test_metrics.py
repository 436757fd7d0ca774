"""The broker's Prometheus endpoint, scraped while real clients produce and consume: the
counters move by exactly what the clients did (broker/metrics/)."""

from __future__ import annotations

import urllib.error
import urllib.request

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic

from broker.processes import BrokerProcess, free_port
from tests.helpers.metrics import dashboard_series, scrape

pytestmark = pytest.mark.clients


@pytest.fixture(scope="module")
def metered(tmp_path_factory):
    port = free_port()
    overrides = {"metrics.port": str(port), "group.initial.rebalance.delay.ms": "0"}
    with BrokerProcess(tmp_path_factory.mktemp("broker") / "logs", overrides) as b:
        b.metrics_url = f"http://127.0.0.1:{port}/metrics"
        yield b


def _create(broker, topic: str, partitions: int) -> None:
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])
    finally:
        admin.close()


def _produce(broker, topic: str, count: int) -> int:
    """`count` records through kafka-python; returns the bytes of their values."""
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=5)
    for i in range(count):
        producer.send(topic, key=str(i % 5).encode(), value=f"value-{i}".encode())
    producer.flush()
    producer.close()
    return sum(len(f"value-{i}") for i in range(count))


def test_messages_and_bytes_in_and_out_match_what_clients_did(metered):
    _create(metered, "m-inout", 3)
    before = scrape(metered.metrics_url)
    assert before.value("kafka_topic_messages_in_total", 0.0, topic="m-inout") == 0
    value_bytes = _produce(metered, "m-inout", 700)
    during = scrape(metered.metrics_url)
    assert during.value("kafka_topic_messages_in_total", topic="m-inout") == 700
    bytes_in = during.value("kafka_topic_bytes_in_total", topic="m-inout")
    assert bytes_in > value_bytes  # the values plus keys, record and batch framing
    # Every record is at a log end offset: the per-partition series add up to it.
    assert during.total("kafka_log_end_offset", topic="m-inout") == 700
    assert during.total("kafka_log_size_bytes", topic="m-inout") == bytes_in
    produce_requests = during.total("kafka_requests_total", api="produce")
    assert produce_requests >= 1
    latency_count = during.value(
        "kafka_request_duration_seconds_count", api="produce", phase="total"
    )
    assert latency_count == produce_requests
    for phase in ("queue", "handler", "purgatory", "send"):
        assert (
            during.value("kafka_request_duration_seconds_count", api="produce", phase=phase)
            == produce_requests
        )

    consumer = KafkaConsumer(bootstrap_servers=metered.bootstrap, consumer_timeout_ms=3000)
    consumer.assign([TopicPartition("m-inout", p) for p in range(3)])
    consumer.seek_to_beginning()
    assert sum(1 for _ in consumer) == 700
    # Scraped while the consumer is connected: a closed connection is let go at once, even
    # with a fetch parked (the read-ahead reads its end, broker/server/pipeline.py).
    assert scrape(metered.metrics_url).value("kafka_network_connections", listener="PLAINTEXT") >= 1
    consumer.close()
    after = scrape(metered.metrics_url)
    # Read from the start: every byte appended went out at least once (kafka-python
    # fetches ahead and may be sent a batch again, whole, when it asks from its middle).
    assert after.value("kafka_topic_bytes_out_total", topic="m-inout") >= bytes_in
    assert after.total("kafka_requests_total", api="fetch") > 0
    assert after.value("kafka_connections_opened_total", listener="PLAINTEXT") >= 3


def test_group_lag_falls_to_zero_after_consumption(metered):
    _create(metered, "m-lag", 2)
    _produce(metered, "m-lag", 400)
    consumer = KafkaConsumer(
        "m-lag",
        bootstrap_servers=metered.bootstrap,
        group_id="m-lag-group",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        consumer_timeout_ms=5000,
    )
    seen = 0
    for _ in consumer:
        seen += 1
        if seen == 150:
            consumer.commit()
            break
    first = scrape(metered.metrics_url)
    assert first.total("kafka_group_lag", group="m-lag-group") == 400 - 150
    assert first.total("kafka_group_committed_offset", group="m-lag-group") == 150
    assert first.value("kafka_groups", state="Stable") >= 1
    assert first.value("kafka_group_rebalances_total") >= 1
    commits_before = first.value("kafka_group_offset_commits_total")
    for _ in consumer:
        seen += 1
    assert seen == 400
    consumer.commit()
    consumer.close()
    done = scrape(metered.metrics_url)
    assert done.total("kafka_group_lag", group="m-lag-group") == 0
    for p in ("0", "1"):
        assert done.value("kafka_group_lag", group="m-lag-group", topic="m-lag", partition=p) == 0
    assert done.value("kafka_group_offset_commits_total") >= commits_before + 2


def test_state_of_a_single_broker(metered):
    state = scrape(metered.metrics_url)
    assert state.value("kafka_controller_active") == 1
    assert state.value("kafka_under_replicated_partitions") == 0
    assert state.value("kafka_offline_partitions") == 0
    assert state.value("kafka_leader_partitions") == state.value("kafka_partitions")
    assert (
        0 <= state.value("kafka_log_leader_epoch_files_pending") <= state.value("kafka_partitions")
    )
    assert state.value("kafka_leader_elections_total") >= state.value("kafka_leader_partitions")
    assert {"Fetch", "Produce", "Rebalance", "Heartbeat"} <= {
        s.labels["purgatory"] for s in state.samples["kafka_purgatory_size"]
    }


def test_only_metrics_is_served(metered):
    base = metered.metrics_url.removesuffix("/metrics")
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(base + "/other", timeout=5)
    assert err.value.code == 404


def test_per_partition_series_can_be_turned_off(tmp_path):
    port = free_port()
    overrides = {"metrics.port": str(port), "metrics.partition.series.enabled": "false"}
    with BrokerProcess(tmp_path / "logs", overrides) as b:
        _create(b, "m-coarse", 4)
        _produce(b, "m-coarse", 100)
        state = scrape(f"http://127.0.0.1:{port}/metrics")
    sizes = [s for s in state.samples["kafka_log_size_bytes"] if s.labels["topic"] == "m-coarse"]
    assert [s.labels for s in sizes] == [{"topic": "m-coarse"}]
    assert state.value("kafka_log_end_offset", topic="m-coarse") == 100
    assert all("partition" not in s.labels for ss in state.samples.values() for s in ss)


def test_no_metrics_port_no_endpoint(broker):
    # The shared broker of the module runs without metrics.port: nothing listens, and the
    # broker serves as before (the other tests of tests/broker use it).
    assert broker.overrides.get("metrics.port") is None


def test_the_dashboard_asks_for_metrics_the_broker_exports(metered):
    """Every kafka_* series docs/grafana-dashboard.json queries is one a broker serves."""
    asked = dashboard_series("kafka_")
    served = set(scrape(metered.metrics_url).samples)
    assert asked and asked <= served, asked - served
