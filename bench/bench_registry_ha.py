"""Registrations per second through a follower (which forwards each to the leader and
answers once its own replay has the write) against through the leader itself, in the
same run, on one broker.

    .venv/bin/python -m bench.bench_registry_ha [--schemas 300] [--rounds 5]

Two registry instances, each its own process (`python -m schemas.registry start`),
sharing `_schemas`: one eligible to lead, one not (so which one leads is known). Each
round registers `--schemas` new schemas (new subjects, so new ids) through the leader,
then as many through the follower, one request at a time over a kept-alive connection;
the fastest round of each counts. The ratio is follower / leader.
"""

from __future__ import annotations

import argparse
import itertools
import json
import tempfile
import time
from pathlib import Path

import httpx

from bench.common import report, running_broker
from broker.processes import RegistryProcess

_names = itertools.count()


def registrations(url: str, count: int) -> float:
    """Seconds to register `count` new schemas through `url`, one after another."""
    with httpx.Client(base_url=url, timeout=30) as http:
        bodies = []
        for _ in range(count):
            n = next(_names)
            schema = {"type": "record", "name": f"R{n}", "fields": [{"name": "f", "type": "long"}]}
            bodies.append((f"/subjects/s{n}-value/versions", {"schema": json.dumps(schema)}))
        start = time.perf_counter()
        for path, body in bodies:
            http.post(path, json=body).raise_for_status()
        return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--schemas", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()

    settings = {"kafkastore.topic": "_schemas_bench", "kafkastore.timeout.ms": "10000"}
    with running_broker(**{"group.initial.rebalance.delay.ms": "0"}) as (bootstrap, _):
        with tempfile.TemporaryDirectory(prefix="bench-registry-ha-") as work:
            leader = RegistryProcess(Path(work) / "leader", bootstrap=bootstrap, settings=settings)
            follower = RegistryProcess(
                Path(work) / "follower",
                bootstrap=bootstrap,
                settings={**settings, "leader.eligibility": "false"},
            )
            with leader, follower:
                registrations(leader.url, 20)  # warm up both paths
                registrations(follower.url, 20)
                best = {"leader": float("inf"), "follower": float("inf")}
                for _ in range(args.rounds):
                    best["leader"] = min(best["leader"], registrations(leader.url, args.schemas))
                    best["follower"] = min(
                        best["follower"], registrations(follower.url, args.schemas)
                    )
    report(
        "registrations through a follower vs the leader",
        args.schemas / best["follower"],
        args.schemas / best["leader"],
        "registrations/s",
        "leader",
    )


if __name__ == "__main__":
    main()
