"""The registry's Prometheus endpoint: a registry process on a broker (schemas in its
_schemas topic), real HTTP clients registering and reading, scraped with prometheus_client's
parser (schemas/registry/metrics.py)."""

from __future__ import annotations

import httpx

from schemas import catalog
from tests.helpers.metrics import dashboard_series, scrape

MEDIA = {"Content-Type": "application/vnd.schemaregistry.v1+json"}


def test_requests_by_route_and_status_and_the_counts_of_schemas(registry):
    http = httpx.Client(base_url=registry.url, headers=MEDIA, timeout=10)
    before = scrape(f"{registry.url}/metrics")
    assert before.value("schema_registry_leader") == 1
    subjects_before = before.value("schema_registry_subjects")
    schema = catalog.load_str("ClickEvent")
    for subject in ("metrics-a-value", "metrics-b-value"):
        answer = http.post(f"/subjects/{subject}/versions", json={"schema": schema})
        assert answer.status_code == 200, answer.text
    assert http.get("/subjects/metrics-missing/versions").status_code == 404
    for _ in range(3):
        assert http.get("/subjects/metrics-a-value/versions/latest").status_code == 200
    after = scrape(f"{registry.url}/metrics")
    register = "/subjects/{subject}/versions"
    latest = "/subjects/{subject}/versions/{version}"

    def moved(route: str, method: str, status: str) -> float:
        labels = {"route": route, "method": method, "status": status}
        return after.value("schema_registry_requests_total", 0.0, **labels) - before.value(
            "schema_registry_requests_total", 0.0, **labels
        )

    assert moved(register, "POST", "200") == 2
    assert moved(register, "GET", "404") == 1
    assert moved(latest, "GET", "200") == 3
    assert (
        after.value("schema_registry_request_duration_seconds_count", route=latest, method="GET")
        >= 3
    )
    # One schema under two subjects: two subjects and versions more, one id.
    assert after.value("schema_registry_subjects") == subjects_before + 2
    assert after.value("schema_registry_versions") >= 2
    assert after.value("schema_registry_schemas") >= 1
    # Routes are templates: no subject name ever becomes a label value.
    assert "metrics-a-value" not in after.text


def test_the_dashboard_asks_for_metrics_the_registry_exports(registry):
    asked = dashboard_series("schema_registry_")
    httpx.get(f"{registry.url}/subjects", timeout=10)  # a request, so its series exist
    served = set(scrape(f"{registry.url}/metrics").samples)
    assert asked and asked <= served, asked - served
