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

from broker.client.coordinator import TRANSACTION_KEY_TYPE
from broker.processes import Cluster, RegistryProcess
from tests.faults import checkers, workloads
from tests.faults.history import INFO, History
from tests.faults.nemesis import Env, Nemesis, Schedule
from tests.helpers.cluster import (
    coordinator_of,
    create_topic,
    fresh,
    group_coordinated_elsewhere,
    in_sync,
    wait_for,
)

# Settings a fault cluster runs with: quick failure detection (tests/helpers/cluster.py),
# and what acks=all relies on: two in-sync replicas, no unclean elections.
FAULT_CLUSTER = {
    "zookeeper.session.timeout.ms": "6000",
    "replica.lag.time.max.ms": "4000",
    "controlled.shutdown.retry.backoff.ms": "300",
    "unclean.leader.election.enable": "false",
    "offsets.topic.replication.factor": "3",
    "group.initial.rebalance.delay.ms": "0",
    # Few transaction state partitions: quick to create on a loaded machine; each one
    # replicated like the data (the coordinator's state survives its broker).
    "transaction.state.log.num.partitions": "3",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
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
        kinds = sorted({a.kind for a in self.anomalies} - {"more"})
        return (
            f"| {self.workload} | {self.nemesis} | {self.seed} | {self.operations} | "
            f"{self.faults} | {checkers.total(self.anomalies)} {', '.join(kinds)} |"
        )


def settle(env: Env, topics: list[str], timeout_s: float = 90.0) -> str | None:
    """Wait until every broker runs and `topics` are fully in sync again; what is still
    wrong after `timeout_s` (None: settled). A cluster with no broker answering is "not
    settled" too, not an error of the run (docs/faults.md, F6)."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": env.cluster.bootstrap})
    factor = len(env.cluster.ids)

    def settled():
        try:
            return all(in_sync(admin, topic, factor) for topic in topics)
        except KafkaException:
            return False

    try:
        wait_for(settled, f"{', '.join(topics)} in sync", timeout_s)
        return None
    except AssertionError as exc:
        return f"not settled: {exc}; {unsettled_views(env, topics)}"


def unsettled_views(env: Env, topics: list[str]) -> str:
    """Where a settle that timed out stands, for the note: the partitions short of a full
    ISR as ZooKeeper holds them, and as each broker's metadata answers (a stale broker
    shows apart from an ISR that never grew back), with the registered brokers."""
    from broker.client.cluster import ClusterMetadata
    from broker.processes import kazoo_session
    from broker.zk import layout as z

    factor, views = len(env.cluster.ids), []
    try:
        views.append(f"registered {sorted(env.cluster.registrations())}")
        with kazoo_session(env.cluster.zookeeper_connect, timeout_s=5) as zk:
            for topic in topics:
                for p in sorted(int(n) for n in zk.get_children(z.partitions_path(topic))):
                    data = zk.get(z.partition_state_path(topic, p))[0]
                    state = z.decode_partition_state(data)
                    if len(state.isr) < factor:
                        views.append(
                            f"zk {topic}-{p} leader {state.leader} "
                            f"epoch {state.leader_epoch} isr {list(state.isr)}"
                        )
    except Exception as exc:  # noqa: BLE001 - a diagnosis, never the run's failure
        views.append(f"zk unread: {exc!r}")
    for broker_id in env.cluster.ids:
        try:
            with ClusterMetadata(env.cluster.broker(broker_id).bootstrap, timeout_s=5) as meta:
                meta.refresh(topics)
                short = [
                    f"{t}-{p.partition} leader {p.leader} epoch {p.leader_epoch} isr {p.isr}"
                    for t in topics
                    for p in meta.topics[t].partitions.values()
                    if len(p.isr) < factor
                ]
            views.append(f"broker {broker_id} says {short or 'all in sync'}")
        except Exception as exc:  # noqa: BLE001
            views.append(f"broker {broker_id} unread: {exc!r}")
    return "; ".join(views)


@dataclass
class Run:
    """What every run sets up: its result, history, the nemesis's view of the cluster and
    its schedule (with the RNG the workload may draw from too)."""

    result: Result
    history: History
    env: Env
    schedule: Schedule
    rng: random.Random
    fault_s: float
    faults: int | None
    started: float = field(default_factory=time.monotonic)

    @classmethod
    def prepare(
        cls, workload: str, cluster: Cluster, nemesis: Nemesis, seed: int, topic: str, *,
        fault_s: float, faults: int | None, env_extra: dict | None, **env_fields,
    ) -> Run:  # fmt: skip
        history = History()
        env = Env(cluster, topic, history, **env_fields, **(env_extra or {}))
        rng = random.Random(seed)
        schedule = Schedule(nemesis, env, rng, faults=faults, hold_s=(fault_s * 0.6, fault_s))
        return cls(
            Result(workload, nemesis.name, seed), history, env, schedule, rng, fault_s, faults
        )

    def faults_then_settle(self, topics: list[str] | None) -> None:
        """Inject and heal the schedule's faults (bounded), then wait for `topics` to be in
        sync again (None: no waiting)."""
        self.schedule.start()
        # Until the schedule injected and healed its faults (bounded), or a while.
        deadline = time.monotonic() + max(60.0, (self.fault_s + 2) * (self.faults or 1) * 3)
        while not self.schedule.done() and time.monotonic() < deadline:
            time.sleep(0.1)
        self.schedule.stop()
        self.result.notes += self.schedule.errors
        if topics and (problem := settle(self.env, topics)) is not None:
            self.result.notes.append(problem)

    def finish(self, anomalies: list[checkers.Anomaly]) -> Result:
        result = self.result
        result.history = self.history
        result.operations = self.history.operations()
        result.faults = self.schedule.injected
        result.anomalies = anomalies
        result.seconds = time.monotonic() - self.started
        return result


def run_producer(
    cluster: Cluster, nemesis: Nemesis, seed: int, *, fault_s=3.0, faults=1, partitions=3,
    env_extra: dict | None = None, rate=300.0,
) -> Result:  # fmt: skip
    topic = fresh("faults")
    create_topic(cluster, topic, partitions, 3, config=TOPIC_CONFIG)
    run = Run.prepare("producer", cluster, nemesis, seed, topic, fault_s=fault_s, faults=faults,
                      env_extra=env_extra)  # fmt: skip
    producer = workloads.Producer(cluster.bootstrap, topic, partitions, run.history, rate).start()
    time.sleep(0.5)
    run.faults_then_settle([topic])
    time.sleep(0.5)
    producer.stop()
    # Not an anomaly (an unacknowledged write may be lost), but many of them is a partition
    # that stayed unavailable, which the settle check, made once, can miss (docs/faults.md,
    # F10).
    indefinite = len(run.history.of(workloads.SEND, INFO))
    if indefinite:
        run.result.notes.append(f"{indefinite} sends indefinite (timed out or unknown)")
    return run.finish(checkers.producer_anomalies(run.history, producer.final_read()))


def run_group(
    cluster: Cluster, nemesis: Nemesis, seed: int, *, fault_s=3.0, faults=1, partitions=6,
    env_extra: dict | None = None,
) -> Result:  # fmt: skip
    topic, group = fresh("faults-group"), fresh("fault-group")
    create_topic(cluster, topic, partitions, 3, config=TOPIC_CONFIG)
    run = Run.prepare("group", cluster, nemesis, seed, topic, fault_s=fault_s, faults=faults,
                      env_extra=env_extra, group=group)  # fmt: skip
    members = workloads.Group(cluster.bootstrap, topic, partitions, group, run.history).start()
    wait_for(lambda: run.history.of(workloads.COMMIT, "ok"), "a first commit")
    run.faults_then_settle([topic])
    time.sleep(1.0)
    members.stop()
    return run.finish(checkers.group_anomalies(run.history, members.final_commits()))


def run_transactions(
    cluster: Cluster, nemesis: Nemesis, seed: int, *, fault_s=3.0, faults=1, partitions=3,
    env_extra: dict | None = None, rate=150.0,
) -> Result:  # fmt: skip
    """Consume-transform-produce: numbered input into one topic, copied to another in
    transactions; the nemesis's "leader" is the input's partition 0 leader, its
    "txn-coordinator" the copier's transaction coordinator."""
    source, target = fresh("faults-in"), fresh("faults-out")
    txn_id = fresh("fault-txn")
    for topic in (source, target):
        create_topic(cluster, topic, partitions, 3, config=TOPIC_CONFIG)
    # The copier's group coordinated by another broker than its transactions: librdkafka
    # never commits a transaction's offsets again once its cached group coordinator left
    # the metadata (docs/client-behaviour.md, section 6; seen here as a stalled copier
    # when kill-txn-coordinator struck a broker that was both).
    txn_coordinator = coordinator_of(cluster.bootstrap, txn_id, TRANSACTION_KEY_TYPE)
    group = group_coordinated_elsewhere(cluster.bootstrap, fresh("fault-copier"), txn_coordinator)
    run = Run.prepare("transactions", cluster, nemesis, seed, source, fault_s=fault_s,
                      faults=faults, env_extra=env_extra, group=group,
                      transactional_id=txn_id)  # fmt: skip
    copier = workloads.Transactional(
        cluster.bootstrap, source, target, partitions, group, txn_id, run.history, rate
    ).start()
    wait_for(lambda: run.history.of(workloads.TXN, "ok"), "a first committed transaction")
    run.faults_then_settle([source, target])
    copier.stop()
    return run.finish(checkers.transaction_anomalies(run.history, copier.final_read()))


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
    instances = start_registries(cluster, work)
    try:
        topic = instances[0].config.read_text().split("kafkastore.topic=")[1].split()[0]
        run = Run.prepare("registry", cluster, nemesis, seed, topic, fault_s=fault_s,
                          faults=faults, env_extra=env_extra, registries=instances)  # fmt: skip
        clients = workloads.Registry(instances, run.history, run.rng).start()
        wait_for(lambda: run.history.of(workloads.REGISTER, "ok"), "a first registration")
        run.faults_then_settle(None)
        time.sleep(1.0)
        clients.stop()
        workloads.registry_leader(instances)  # everyone agrees again
        anomalies = checkers.registry_anomalies(run.history, clients.final_views())
        fenced = sum(r.log_text().count("dropping the entry") for r in instances)
        if fenced:
            run.result.notes.append(f"{fenced} entries dropped by the fence")
        return run.finish(anomalies)
    finally:
        for r in instances:
            if r.proc is not None:  # a paused instance would not hear SIGTERM
                with contextlib.suppress(ProcessLookupError):
                    os.kill(r.proc.pid, signal.SIGCONT)
            r.stop()


def run_hourly(
    cluster: Cluster, nemesis: Nemesis, seed: int, work: Path, spark, *, fault_s=3.0,
    faults=1, partitions=3, env_extra: dict | None = None, rate=100.0,
    registry_url: str | None = None,
) -> Result:  # fmt: skip
    """The hourly load (`workloads.HourlyLoad`) run back to back on `spark` (the caller's
    session, kept across runs) while an audited producer writes to a topic of the run's
    own and the nemesis acts on its partition 0; after the heal a final load catches up
    and the audit runs. A registry of the run's own (one instance, its own `_schemas_*`
    topic, replicated like the data) unless `registry_url` names one."""
    topic = fresh("hourly")
    create_topic(cluster, topic, partitions, 3, config=TOPIC_CONFIG)
    registries = []
    if registry_url is None:
        name = fresh("sr")
        create_topic(cluster, f"_schemas_{name}", 1, 3, config=TOPIC_CONFIG)
        settings = {"kafkastore.topic": f"_schemas_{name}", "kafkastore.timeout.ms": "8000",
                    "schema.registry.group.id": name}  # fmt: skip
        registries = [RegistryProcess(work / name, bootstrap=cluster.bootstrap, settings=settings)]
        registries[0].spawn()
        registries[0].wait_until_ready()
        registry_url = registries[0].url
    try:
        run = Run.prepare("hourly", cluster, nemesis, seed, topic, fault_s=fault_s,
                          faults=faults, env_extra=env_extra)  # fmt: skip
        load = workloads.HourlyLoad(cluster.bootstrap, registry_url, topic, partitions,
                                    work / f"warehouse-{topic}", run.history, spark, rate=rate)  # fmt: skip
        create_topic(cluster, load.audit_topic, 1, 3, config=TOPIC_CONFIG)
        load.start()
        # Faults while loads carry records, not before the first record was produced.
        wait_for(
            lambda: any(any(r[1] for r in op.value[1].values())
                        for op in run.history.of(workloads.LOAD, "ok")),
            "a first committed load with records", 180,
        )  # fmt: skip
        run.faults_then_settle([topic, load.audit_topic])
        time.sleep(0.5)
        load.stop()
        failed = len(run.history.of(workloads.LOAD, INFO))
        indefinite = len(run.history.of(workloads.SEND, INFO))
        loads = len(run.history.of(workloads.LOAD, "ok"))
        run.result.notes.append(
            f"{loads} loads committed, {failed} failed (info); {indefinite} sends indefinite; "
            f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}"
        )
        anomalies = checkers.hourly_anomalies(run.history, load.loaded_rows(), load.ledgers())
        return run.finish(anomalies)
    finally:
        for r in registries:
            r.stop()
