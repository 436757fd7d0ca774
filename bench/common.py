"""Shared by the benchmarks: broker and registry subprocesses, and timing helpers."""

from __future__ import annotations

import os
import random
import socket
import subprocess
import sys
import tempfile
import time
import uuid
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


BASE_MS = 1_714_566_600_000


def events(count: int, seed: int = 7) -> list[dict]:
    """PageViewEvent v2 records, the same in every benchmark that decodes or serializes."""
    rng = random.Random(seed)
    pages = ["feed", "profile", "jobs", "search", "messaging", "notifications"]
    return [
        {
            "header": {
                "time": BASE_MS + i * 37,
                "host": f"web-{rng.randrange(40):02d}.example.com",
                "service": "frontend",
                "event_id": str(uuid.UUID(int=rng.getrandbits(128), version=4)),
            },
            "member_id": rng.randrange(2**31),
            "page_key": rng.choice(pages),
            "page_url": f"https://www.example.com/{rng.choice(pages)}?id={rng.randrange(10**9)}",
            "referrer": None if rng.random() < 0.5 else "https://www.example.com/feed",
        }
        for i in range(count)
    ]
