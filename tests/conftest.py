"""Shared fixtures: real brokers in subprocesses, on free loopback ports."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port: int, timeout: float = 30.0, proc: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"process exited with {proc.returncode} before listening on {port}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"nothing listening on port {port} after {timeout}s")


class BrokerProcess:
    """`python -m broker start` in a subprocess, as a user runs it."""

    def __init__(
        self, log_dir: Path, overrides: dict[str, str] | None = None, port: int | None = None
    ):
        self.log_dir = log_dir
        self.port = port or free_port()
        self.overrides = {
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "log.dirs": str(log_dir),
            **(overrides or {}),
        }
        self.proc: subprocess.Popen | None = None
        self.output = log_dir.parent / f"broker-{self.port}.log"

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> BrokerProcess:
        args = [sys.executable, "-m", "broker", "start", str(ROOT / "conf" / "server.properties")]
        for key, value in self.overrides.items():
            args += ["--override", f"{key}={value}"]
        self._out = open(self.output, "ab")
        self.proc = subprocess.Popen(
            args,
            cwd=ROOT,
            stdout=self._out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        wait_for_port(self.port, proc=self.proc)
        return self

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM and wait: the broker flushes and checkpoints on the way out."""
        if self.proc is None:
            return 0
        self.proc.terminate()
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        self.proc = None
        self._out.close()
        return code

    def kill(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None
            self._out.close()

    def log_text(self) -> str:
        return self.output.read_text(errors="replace")


@pytest.fixture
def broker_factory(tmp_path):
    started: list[BrokerProcess] = []

    def make(
        overrides: dict[str, str] | None = None,
        log_dir: Path | None = None,
        port: int | None = None,
    ) -> BrokerProcess:
        b = BrokerProcess(log_dir or tmp_path / f"logs-{len(started)}", overrides, port)
        started.append(b)
        return b.start()

    yield make
    for b in started:
        b.stop()


class RegistryProcess:
    """`python -m schemas.registry start` in a subprocess, storing schemas on a broker."""

    def __init__(self, bootstrap: str, work: Path, port: int | None = None) -> None:
        self.port = port or free_port()
        self.config = work / f"registry-{self.port}.properties"
        self.config.write_text(
            f"listeners=http://127.0.0.1:{self.port}\n"
            "kafkastore.type=kafka\n"
            f"kafkastore.bootstrap.servers={bootstrap}\n"
            "kafkastore.topic=_schemas\n"
        )
        self.output = work / f"registry-{self.port}.log"
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> RegistryProcess:
        self._out = open(self.output, "ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "schemas.registry", "start", str(self.config)],
            cwd=ROOT,
            stdout=self._out,
            stderr=subprocess.STDOUT,
        )
        wait_for_port(self.port, proc=self.proc, timeout=60)
        return self

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self.proc = None
            self._out.close()


@pytest.fixture(scope="module")
def registry(broker, tmp_path_factory):
    """A registry on the module's broker (schemas kept in its _schemas topic)."""
    r = RegistryProcess(broker.bootstrap, tmp_path_factory.mktemp("registry")).start()
    yield r
    r.stop()


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    """One broker shared by a test module (start-up is not free)."""
    b = BrokerProcess(tmp_path_factory.mktemp("broker") / "logs").start()
    yield b
    b.stop()
