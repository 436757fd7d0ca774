"""Shared by the benchmarks: broker and registry subprocesses, and timing helpers."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def running_broker(**overrides: str):
    """Our broker as users run it: `python -m broker start`, in its own process."""
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="bench-broker-") as work:
        args = [
            sys.executable,
            "-m",
            "broker",
            "start",
            str(ROOT / "conf" / "server.properties"),
            "--override",
            f"listeners=PLAINTEXT://127.0.0.1:{port}",
            "--override",
            f"log.dirs={work}/logs",
        ]
        for k, v in overrides.items():
            args += ["--override", f"{k}={v}"]
        proc = subprocess.Popen(
            args,
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    proc.kill()
                    raise RuntimeError("broker did not start") from None
                time.sleep(0.05)
        try:
            yield f"127.0.0.1:{port}", Path(work) / "logs"
        finally:
            proc.terminate()
            proc.wait(30)


def _wait_for_port(port: int, proc: subprocess.Popen, what: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            if time.monotonic() > deadline or proc.poll() is not None:
                proc.kill()
                raise RuntimeError(f"{what} did not start") from None
            time.sleep(0.05)


@contextmanager
def running_registry(bootstrap: str):
    """Our schema registry as users run it, `python -m schemas.registry start <props>`,
    keeping its schemas in the `_schemas` topic of the broker at `bootstrap`. Yields its URL."""
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="bench-registry-") as work:
        props = Path(work) / "registry.properties"
        props.write_text(
            f"listeners=http://127.0.0.1:{port}\n"
            "kafkastore.type=kafka\n"
            f"kafkastore.bootstrap.servers={bootstrap}\n"
            "kafkastore.topic=_schemas\n"
        )
        proc = subprocess.Popen(
            [sys.executable, "-m", "schemas.registry", "start", str(props)],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        _wait_for_port(port, proc, "schema registry", 60)
        try:
            yield f"http://127.0.0.1:{port}"
        finally:
            proc.terminate()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def report(name: str, ours: float, baseline: float, unit: str, baseline_name: str) -> str:
    ratio = ours / baseline if baseline else float("nan")
    line = f"{name}: ours {ours:,.0f} {unit}, {baseline_name} {baseline:,.0f} {unit}, ratio {ratio:.2f}"
    print(line, flush=True)
    return line
