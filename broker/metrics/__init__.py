"""The broker's Prometheus metrics (README.md): event metrics, state read at scrape time,
and the `/metrics` endpoint."""

from __future__ import annotations

from broker.metrics.definitions import BrokerMetrics, NullMetrics


def broker_metrics(cfg) -> BrokerMetrics:
    """Counting metrics when `metrics.port` is set, else the do-nothing ones."""
    return BrokerMetrics() if cfg["metrics.port"] is not None else NullMetrics()


__all__ = ["BrokerMetrics", "NullMetrics", "broker_metrics"]
