"""One run of the campaign: a workload against a cluster while a nemesis acts on a seeded
schedule, then the cluster healed and settled, the final reads made and the checkers run.
Used by the quick tests (tests/faults/test_*.py) and the soak (bench/bench_faults.py)."""

from __future__ import annotations

import contextlib
import os
import random
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

from broker.processes import Cluster, RegistryProcess
from tests.faults import checkers, workloads
from tests.faults.history import History
from tests.faults.nemesis import Env, Nemesis, Schedule
from tests.helpers.cluster import create_topic, fresh, in_sync, wait_for

# Settings a fault cluster runs with: quick failure detection (tests/helpers/cluster.py),
# and what acks=all relies on: two in-sync replicas, no unclean elections.
FAULT_CLUSTER = {
    "zookeeper.session.timeout.ms": "6000",
    "replica.lag.time.max.ms": "4000",
    "controlled.shutdown.retry.backoff.ms": "300",
    "unclean.leader.election.enable": "false",
    "offsets.topic.replication.factor": "3",
    "group.initial.rebalance.delay.ms": "0",
}
TOPIC_CONFIG = {"min.insync.replicas": "2"}


@dataclass
class Result:
    workload: str
    nemesis: str
    seed: int
    operations: int = 0
    faults: int = 0
    anomalies: list[checkers.Anomaly] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0
    history: History | None = None

    def row(self) -> str:
        kinds = sorted({a.kind for a in self.anomalies})
        return (
            f"| {self.workload} | {self.nemesis} | {self.seed} | {self.operations} | "
            f"{self.faults} | {len(self.anomalies)} {', '.join(kinds)} |"
        )


def settle(env: Env, partitions: int, timeout_s: float = 90.0) -> str | None:
    """Wait until every broker runs and the topic is fully in sync again; what is still
    wrong after `timeout_s` (None: settled)."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": env.cluster.bootstrap})
    try:
        wait_for(lambda: in_sync(admin, env.topic, len(env.cluster.ids)), "in sync", timeout_s)
        return None
    except AssertionError as exc:
        return f"not settled: {exc}"


def _schedule(nemesis, env, seed, fault_s, faults) -> tuple[Schedule, random.Random]:
    rng = random.Random(seed)
    return Schedule(nemesis, env, rng, faults=faults, hold_s=(fault_s * 0.6, fault_s)), rng


def run_producer(
    cluster: Cluster, nemesis: Nemesis, seed: int, *, fault_s=3.0, faults=1, partitions=3,
    env_extra: dict | None = None, rate=300.0,
) -> Result:  # fmt: skip
    started = time.monotonic()
    result = Result("producer", nemesis.name, seed)
    topic = fresh("faults")
    create_topic(cluster, topic, partitions, 3, config=TOPIC_CONFIG)
    history = History()
    env = Env(cluster, topic, history, **(env_extra or {}))
    schedule, _ = _schedule(nemesis, env, seed, fault_s, faults)
    producer = workloads.Producer(cluster.bootstrap, topic, partitions, history, rate).start()
    time.sleep(0.5)
    schedule.start()
    _run_until(schedule, fault_s, faults)
    schedule.stop()
    result.notes += schedule.errors
    if (problem := settle(env, partitions)) is not None:
        result.notes.append(problem)
    time.sleep(0.5)
    producer.stop()
    read = producer.final_read()
    return _finish(result, history, schedule, checkers.producer_anomalies(history, read), started)


def run_group(
    cluster: Cluster, nemesis: Nemesis, seed: int, *, fault_s=3.0, faults=1, partitions=6,
    env_extra: dict | None = None,
) -> Result:  # fmt: skip
    started = time.monotonic()
    result = Result("group", nemesis.name, seed)
    topic, group = fresh("faults-group"), fresh("fault-group")
    create_topic(cluster, topic, partitions, 3, config=TOPIC_CONFIG)
    history = History()
    env = Env(cluster, topic, history, group=group, **(env_extra or {}))
    schedule, _ = _schedule(nemesis, env, seed, fault_s, faults)
    members = workloads.Group(cluster.bootstrap, topic, partitions, group, history).start()
    wait_for(lambda: history.of(workloads.COMMIT, "ok"), "a first commit")
    schedule.start()
    _run_until(schedule, fault_s, faults)
    schedule.stop()
    result.notes += schedule.errors
    if (problem := settle(env, partitions)) is not None:
        result.notes.append(problem)
    time.sleep(1.0)
    members.stop()
    final = members.final_commits()
    anomalies = checkers.group_anomalies(history, final)
    return _finish(result, history, schedule, anomalies, started)


def start_registries(cluster: Cluster, work: Path, count=3, session_ms=6000):
    name = fresh("sr")
    settings = {
        "kafkastore.topic": f"_schemas_{name}",
        "schema.registry.group.id": name,
        "schema.registry.group.session.timeout.ms": str(session_ms),
        "kafkastore.timeout.ms": "8000",
    }
    instances = [
        RegistryProcess(work / f"{name}-{i}", bootstrap=cluster.bootstrap, settings=settings)
        for i in range(count)
    ]
    for r in instances:
        r.spawn()
    for r in instances:
        r.wait_until_ready()
    return instances


def run_registry(
    cluster: Cluster, nemesis: Nemesis, seed: int, work: Path, *, fault_s=3.0, faults=1,
    env_extra: dict | None = None,
) -> Result:  # fmt: skip
    started = time.monotonic()
    result = Result("registry", nemesis.name, seed)
    instances = start_registries(cluster, work)
    try:
        history = History()
        topic = instances[0].config.read_text().split("kafkastore.topic=")[1].split()[0]
        env = Env(cluster, topic, history, registries=instances, **(env_extra or {}))
        schedule, rng = _schedule(nemesis, env, seed, fault_s, faults)
        clients = workloads.Registry(instances, history, rng).start()
        wait_for(lambda: history.of(workloads.REGISTER, "ok"), "a first registration")
        schedule.start()
        _run_until(schedule, fault_s, faults)
        schedule.stop()
        result.notes += schedule.errors
        time.sleep(1.0)
        clients.stop()
        workloads.registry_leader(instances)  # everyone agrees again
        views = clients.final_views()
        anomalies = checkers.registry_anomalies(history, views)
        fenced = sum(r.log_text().count("dropping the entry") for r in instances)
        if fenced:
            result.notes.append(f"{fenced} entries dropped by the fence")
        return _finish(result, history, schedule, anomalies, started)
    finally:
        for r in instances:
            if r.proc is not None:  # a paused instance would not hear SIGTERM
                with contextlib.suppress(ProcessLookupError):
                    os.kill(r.proc.pid, signal.SIGCONT)
            r.stop()


def _run_until(schedule: Schedule, fault_s: float, faults: int | None) -> None:
    """Until the schedule injected and healed its faults (bounded), or a while."""
    deadline = time.monotonic() + max(60.0, (fault_s + 2) * (faults or 1) * 3)
    while not schedule.done() and time.monotonic() < deadline:
        time.sleep(0.1)


def _finish(result, history, schedule, anomalies, started) -> Result:
    result.history = history
    result.operations = history.operations()
    result.faults = schedule.injected
    result.anomalies = anomalies
    result.seconds = time.monotonic() - started
    return result
