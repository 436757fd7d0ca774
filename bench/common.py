"""Shared by the benchmarks: our broker and registry in their own processes, and timing
helpers."""

from __future__ import annotations

import random
import tempfile
import uuid
from contextlib import contextmanager
from pathlib import Path

from broker.processes import BrokerProcess, Cluster, RegistryProcess, ZooKeeperProcess


@contextmanager
def running_broker(**overrides: str):
    """Our broker as users run it (`python -m broker start`), in its own process, on a
    temporary log directory. Yields the bootstrap address and that directory."""
    with tempfile.TemporaryDirectory(prefix="bench-broker-") as work:
        logs = Path(work) / "logs"
        with BrokerProcess(logs, overrides, log_path=Path(work) / "broker.log") as broker:
            yield broker.bootstrap, logs


@contextmanager
def running_cluster(
    brokers: int = 3,
    work: Path | None = None,
    zookeeper_tick_ms: int = 2000,
    broker_overrides: dict[int, dict[str, str]] | None = None,
    **overrides: str,
):
    """ZooKeeper (ticking every `zookeeper_tick_ms`: sessions expire on tick boundaries) and
    `brokers` brokers as users run them (`broker.processes.Cluster`), in `work` (kept, with
    the servers' logs under logs/) or a temporary directory, `overrides` given to every
    broker and `broker_overrides[id]` to one. Yields the started Cluster."""
    with tempfile.TemporaryDirectory(prefix="bench-cluster-") as temporary:
        work = work or Path(temporary)
        zookeeper = ZooKeeperProcess(
            work / "zookeeper", tick_ms=zookeeper_tick_ms, log_path=work / "logs" / "zookeeper.log"
        )
        with Cluster(
            work,
            brokers,
            zookeeper=zookeeper,
            overrides=overrides,
            broker_overrides=broker_overrides,
        ) as cluster:
            yield cluster


@contextmanager
def running_registry(bootstrap: str):
    """Our schema registry as users run it (`python -m schemas.registry start`), keeping its
    schemas in the `_schemas` topic of the broker at `bootstrap`. Yields its URL."""
    with tempfile.TemporaryDirectory(prefix="bench-registry-") as work:
        with RegistryProcess(Path(work), bootstrap=bootstrap) as registry:
            yield registry.url


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
