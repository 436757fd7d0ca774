"""Our registry served in this process by a real uvicorn server on a free loopback port
(the registry and ingest tests use it; `broker.processes.RegistryProcess` runs it as its
own process instead)."""

from __future__ import annotations

import socket
import threading
import time
from dataclasses import dataclass

import uvicorn

from schemas.compatibility import Level
from schemas.registry.app import create_app
from schemas.registry.service import Registry
from schemas.store import SchemaStore


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
