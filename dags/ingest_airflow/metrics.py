"""The load's and the audit's Prometheus metrics (ingest/metrics.py) reported again through
Airflow's own metrics (statsd or OpenTelemetry, as Airflow's [metrics] section says), so a
team watching Airflow sees them beside the tasks' own durations and states.

Each sample becomes a gauge named `kafka_hourly.<metric>.<label values>` (statsd has no
labels: the values go into the name) with the labels as tags too, for backends that
take tags.
"""

from __future__ import annotations

from airflow.sdk.observability.stats import Stats
from prometheus_client.parser import text_string_to_metric_families

PREFIX = "kafka_hourly"


def report(text: str) -> int:
    """Every sample of Prometheus text as an Airflow gauge; returns how many."""
    count = 0
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            name = ".".join([PREFIX, sample.name, *sample.labels.values()])
            Stats.gauge(name, sample.value, tags=dict(sample.labels))
            count += 1
    return count
