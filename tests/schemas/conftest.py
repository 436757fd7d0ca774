"""Fixtures: our registry served by a real uvicorn server on a free loopback port."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from schemas.compatibility import Level
from schemas.store import InMemoryStore, SchemaStore
from tests.helpers.cluster import broker_without_group_delay  # noqa: F401  (broker_overrides)
from tests.helpers.mock_cluster import kafka, mock_cluster  # noqa: F401  (fixtures)
from tests.helpers.registry_server import RunningRegistry, ServerThread, start_registry


@pytest.fixture
def running_registry() -> Iterator[RunningRegistry]:
    """A fresh registry (in-memory store, BACKWARD) per test."""
    store = InMemoryStore()
    server, registry = start_registry(store)
    with server as url:
        yield RunningRegistry(url, registry, store)


@pytest.fixture
def registry_server():
    """Start registries on a given store: ``with registry_server(store) as url: ...``.
    Two in a row on one store is a restart."""

    def start(store: SchemaStore, level: Level = Level.BACKWARD) -> ServerThread:
        return start_registry(store, level)[0]

    return start


def _snapshot(http: httpx.Client) -> dict:
    """Everything a client can see: subjects, versions (deleted too), ids, configs."""
    seen = {"config": http.get("/config").json(), "subjects": {}}
    for subject in http.get("/subjects?deleted=true").json():
        versions = http.get(f"/subjects/{subject}/versions?deleted=true").json()
        seen["subjects"][subject] = {
            "live": http.get(f"/subjects/{subject}/versions").json()
            if subject in http.get("/subjects").json()
            else [],
            "versions": [
                http.get(f"/subjects/{subject}/versions/{v}?deleted=true").json() for v in versions
            ],
            "config": http.get(f"/config/{subject}").json(),
        }
    return seen


@pytest.fixture
def registry_snapshot():
    return _snapshot
