"""The broker's request tallies (broker/metrics/definitions.py), fed request frames as the
network layer does, read back through prometheus_client's parser."""

from __future__ import annotations

from prometheus_client import generate_latest

from broker.metrics.definitions import BrokerMetrics
from broker.protocol.apis import API_VERSIONS, PRODUCE
from tests.helpers.metrics import Scrape


def frame(key: int, version: int) -> bytes:
    return key.to_bytes(2, "big") + version.to_bytes(2, "big", signed=True) + b"\0" * 8


def test_phases_land_in_their_buckets_and_sum():
    metrics = BrokerMetrics()
    # frame in at 0, handler 2 ms later for 3 ms, 10 ms parked, 0.8 ms to send
    metrics.request_done(frame(PRODUCE, 8), 0.0, 0.002, 0.005, 0.015, 0.0158)
    scrape = Scrape(generate_latest(metrics.registry).decode())
    assert scrape.value("kafka_requests_total", api="produce", version="8") == 1

    def le(phase: str, bound: str) -> float:
        return scrape.value(
            "kafka_request_duration_seconds_bucket", api="produce", phase=phase, le=bound
        )

    assert (le("queue", "0.001"), le("queue", "0.0025")) == (0, 1)
    assert (le("handler", "0.0025"), le("handler", "0.005")) == (0, 1)
    assert (le("purgatory", "0.005"), le("purgatory", "0.01")) == (0, 1)
    assert (le("send", "0.0005"), le("send", "0.001")) == (0, 1)
    assert (le("total", "0.01"), le("total", "0.025"), le("total", "+Inf")) == (0, 1, 1)
    total = scrape.value("kafka_request_duration_seconds_sum", api="produce", phase="total")
    assert abs(total - 0.0158) < 1e-12


def test_versions_we_do_not_declare_share_one_series():
    metrics = BrokerMetrics()
    for version in (99, 100, 3000, 99):
        metrics.request_done(frame(API_VERSIONS, version), 0.0, 0.0, 0.0, 0.0, 0.0)
    metrics.request_done(frame(API_VERSIONS, 3), 0.0, 0.0, 0.0, 0.0, 0.0)
    scrape = Scrape(generate_latest(metrics.registry).decode())
    series = {s.labels["version"]: s.value for s in scrape.samples["kafka_requests_total"]}
    assert series == {"unsupported": 4, "3": 1}
    assert (
        scrape.value("kafka_request_duration_seconds_count", api="api_versions", phase="total") == 5
    )
