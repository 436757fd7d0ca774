"""Fixtures: our registry served by a real uvicorn server on a free loopback port."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest
import uvicorn

from schemas.compatibility import Level
from schemas.registry.app import create_app
from schemas.registry.service import Registry
from schemas.store import InMemoryStore, SchemaStore
from tests.mock_cluster import kafka, mock_cluster  # noqa: F401  (fixtures)


@dataclass
class RunningRegistry:
    url: str
    registry: Registry
    store: SchemaStore


class ServerThread:
    """uvicorn in a background thread, on a socket bound before it starts so the
    port is known and free."""

    def __init__(self, registry: Registry) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        config = uvicorn.Config(create_app(registry), log_level="warning", lifespan="off")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True
        )

    def __enter__(self) -> str:
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.01)
        return f"http://127.0.0.1:{self.port}"

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
        self.sock.close()


def start_registry(
    store: SchemaStore, level: Level = Level.BACKWARD
) -> tuple[ServerThread, Registry]:
    registry = Registry(store, level)
    registry.load()
    return ServerThread(registry), registry


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
