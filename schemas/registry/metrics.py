"""The registry's Prometheus metrics, served at `GET /metrics` of its own listener.

Requests are counted by route template (`/subjects/{subject}/versions`, never the
subject itself: cardinality stays bounded by the API), method and status, with a latency
histogram by route and method; schemas, subjects and versions are read from the state at
scrape time. `schema_registry_leader` is 1 on the instance the election made leader (or a
registry alone on its store), 0 on a follower, read at scrape time.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector
from starlette.requests import Request
from starlette.responses import Response

from schemas.registry.state import RegistryState

BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


class _StateCollector(Collector):
    def __init__(self, state: RegistryState, leading: Callable[[], bool]) -> None:
        self.state = state
        self.leading = leading

    def collect(self):
        subjects, versions, schemas = self.state.counts()
        yield GaugeMetricFamily(
            "schema_registry_subjects", "Subjects with a live version.", subjects
        )
        yield GaugeMetricFamily(
            "schema_registry_versions", "Live (not deleted) versions.", versions
        )
        yield GaugeMetricFamily(
            "schema_registry_schemas", "Distinct schema ids used by live versions.", schemas
        )
        yield GaugeMetricFamily(
            "schema_registry_leader",
            "1 when this registry accepts writes (the leader).",
            1 if self.leading() else 0,
        )


class RegistryMetrics:
    def __init__(self, state: RegistryState, leading: Callable[[], bool] = lambda: True) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "schema_registry_requests",
            "HTTP requests by route template, method and status.",
            ["route", "method", "status"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "schema_registry_request_duration_seconds",
            "HTTP request latency by route template and method.",
            ["route", "method"],
            buckets=BUCKETS,
            registry=self.registry,
        )
        self.registry.register(_StateCollector(state, leading))

    async def middleware(self, request: Request, call_next) -> Response:
        """Starlette HTTP middleware: times and counts every request."""
        started = time.perf_counter()
        status = 500
        try:
            response = await call_next(request)
            status = response.status_code
            return response
        finally:
            route = request.scope.get("route")
            template = getattr(route, "path", None) or "unmatched"
            method = request.method
            self.latency.labels(template, method).observe(time.perf_counter() - started)
            self.requests.labels(template, method, str(status)).inc()

    def endpoint(self) -> Response:
        return Response(generate_latest(self.registry), media_type=CONTENT_TYPE_LATEST)
