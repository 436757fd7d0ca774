"""The load's metrics reported through Airflow's own metrics: Airflow's OpenTelemetry
logger (the one `[metrics] otel_on` configures) on OpenTelemetry's in-memory reader, fed
a metrics file as the load writes it (ingest/metrics.py)."""

from __future__ import annotations

import sys

import pytest
from airflow.sdk._shared.observability.metrics.base_stats_logger import NoStatsLogger
from airflow.sdk._shared.observability.metrics.otel_logger import SafeOtelLogger
from airflow.sdk.observability import stats
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from prometheus_client import CollectorRegistry, Gauge, generate_latest

from broker.processes import ROOT

sys.path.insert(0, str(ROOT / "dags"))
from ingest_airflow import metrics as airflow_metrics  # noqa: E402


@pytest.fixture
def otel():
    reader = InMemoryMetricReader()
    logger = SafeOtelLogger(MeterProvider(metric_readers=[reader]), prefix="airflow")
    stats.initialize(factory=lambda: logger, export_legacy_names=False)
    yield reader
    stats.initialize(factory=NoStatsLogger, export_legacy_names=True)


def gauges(reader: InMemoryMetricReader) -> dict[str, float]:
    out = {}
    for resource in reader.get_metrics_data().resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                for point in metric.data.data_points:
                    out[metric.name] = point.value
    return out


def test_every_sample_becomes_an_airflow_gauge(otel):
    registry = CollectorRegistry()
    records = Gauge("ingest_run_records", "Records loaded.", ["topic"], registry=registry)
    records.labels("page-views").set(4500)
    records.labels("clicks").set(1200)
    Gauge("ingest_lag_end_offsets", "Behind.", ["topic"], registry=registry).labels("clicks").set(0)
    assert airflow_metrics.report(generate_latest(registry).decode()) == 3
    assert gauges(otel) == {
        "airflow.kafka_hourly.ingest_run_records.page-views": 4500,
        "airflow.kafka_hourly.ingest_run_records.clicks": 1200,
        "airflow.kafka_hourly.ingest_lag_end_offsets.clicks": 0,
    }
