"""The partition sweep (issue 23): three brokers and ZooKeeper as processes
(`broker.processes.Cluster`), replication factor 3, min.insync.replicas 2, at each size of
`--partitions`, in one topic (`one`) and spread over 100 topics (`spread`), a fresh cluster
for each. The steps, each bounded by its own timeout (reported as "> N s", never a hang):

- create: CreateTopics to every partition led with a full ISR (Metadata);
- acks=1 round, then acks=all round: one 100 B record to every partition from a warm
  confluent-kafka producer (linger 20 ms; metadata fetched and a record already written
  through each leader), to the last acknowledgement. The acks=1 round on the same
  partitions is the acks=all round's baseline;
- idle: CPU (% of one core, /proc/<pid>/stat) and RSS of each broker over `--idle-s`,
  once the brokers have written the leader-epoch files the create changed (their gauge
  kafka_log_leader_epoch_files_pending at 0: the ticks write them in slices, tens of
  seconds at 10,000 partitions) and `--settle-s` more;
- failover: SIGKILL of a broker (not the controller) to every partition led by a live
  broker, against zookeeper.session.timeout.ms + 3 s;
- restart: that broker started again: to serving (its port answers), to registered in
  ZooKeeper, to every partition's ISR full again (it recovers its logs after a crash);
- controller: SIGKILL of the controller to a new controller elected and every partition led
  by a live broker; then its restart to full ISR (controller-restart);
- startup: a controlled shutdown (SIGTERM, timed: leaders move away first) and a start of
  that broker with every partition on disk: to serving, to registered, to full ISR.

Each step prints its wall time, the CPU seconds each broker spent in it, the requests the
brokers received by API (their /metrics endpoints: LeaderAndIsr, UpdateMetadata, Fetch...,
the clients' Metadata polls included) and ZooKeeper's requests and writes (`srvr`): counts
per event that a test can bound without timing anything. The summary gives every figure
against the same step at the smallest size of the run: `x/partition` is that ratio divided
by the ratio of partitions (1.00 = linear growth, < 1 sub-linear).

    .venv/bin/python -m bench.bench_partitions [--partitions 10,100,1000,10000]
        [--layouts one,spread] [--steps create,acks,idle,failover,restart,controller,startup]
        [--idle-s 10] [--session-timeout-ms 6000] [--zookeeper-tick-ms 2000]
        [--profile DIR --profile-steps acks-all,create,idle] [--work DIR]

Results: docs/benchmarks.md, "Cluster: partitions, latency and replication at scale".
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from bench.common import running_cluster
from bench.probes import (
    Usage,
    gauge,
    metrics_overrides,
    profiled,
    rss_mib,
    snapshot,
    usage_between,
    wait_until,
)
from broker.client.zk_consumer.zk_group import read_registrations
from broker.processes import Cluster, kazoo_session, port_answers
from broker.util.clock import SECOND_MS
from broker.zk.layout import CONTROLLER, decode_controller

STEPS = ("create", "acks", "idle", "failover", "restart", "controller", "startup")
SPREAD_TOPICS = 100
# The wait for the create's leader-epoch files before the idle sample (issue 23: ~30-100 s
# at 10,000 partitions on two cores).
SETTLE_TIMEOUT_S = 300.0
VALUE = b"x" * 100


@dataclass
class Outcome:
    """A step: its wall time (None: not within its timeout), what it cost, and any
    milestones (seconds from its start) or figures it reports."""

    name: str
    timeout_s: float
    wall_s: float | None = None
    usage: Usage = field(default_factory=Usage)
    marks: dict[str, float | None] = field(default_factory=dict)
    note: str = ""
    # ZooKeeper reads of the benchmark's own milestones, left out of the step's count.
    own_zookeeper_reads: int = 0

    def wall(self) -> str:
        return f"> {self.timeout_s:.0f} s" if self.wall_s is None else f"{self.wall_s:.2f} s"


class Sweep:
    """One size and layout on a fresh cluster: the steps in order, each printed as it ends."""

    def __init__(
        self,
        cluster: Cluster,
        zookeeper: KazooClient,
        topics: dict[str, int],
        args: argparse.Namespace,
    ):
        # One ZooKeeper session for the sweep's own reads: a session per read (as
        # Cluster.controller opens) would add two writes each to the counts.
        self.cluster, self.zookeeper, self.topics, self.args = cluster, zookeeper, topics, args
        # Metadata of every partition costs the brokers more as partitions grow: the checks
        # poll less often then, so they do not become the load they measure.
        self.poll_s = 0.05 + sum(topics.values()) / 20_000
        self.label = f"{sum(topics.values())}p-{'one' if len(topics) == 1 else 'spread'}"
        self.admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        self.outcomes: dict[str, Outcome] = {}

    # -- what Metadata says -------------------------------------------------------------------

    def partitions(self) -> list[tuple[int, list[int], list[int]]] | None:
        """(leader, replicas, ISR) of every partition of the sweep's topics; None while a
        topic is missing or short of partitions."""
        md = self.admin.list_topics(timeout=30)
        found = []
        for topic, count in self.topics.items():
            meta = md.topics.get(topic)
            if meta is None or meta.error is not None or len(meta.partitions) < count:
                return None
            found += [(p.leader, p.replicas, p.isrs) for p in meta.partitions.values()]
        return found

    def all_led(self, live: set[int]) -> bool:
        states = self.partitions()
        return states is not None and all(leader in live for leader, _, _ in states)

    def all_in_sync(self) -> bool:
        states = self.partitions()
        return states is not None and all(
            leader >= 0 and len(isr) == len(replicas) for leader, replicas, isr in states
        )

    def controller(self) -> int | None:
        try:
            return decode_controller(self.zookeeper.get(CONTROLLER)[0])
        except NoNodeError:
            return None

    def live(self) -> set[int]:
        return {i for i in self.cluster.ids if self.cluster.broker(i).proc is not None}

    # -- a step -------------------------------------------------------------------------------

    def step(
        self, name: str, timeout_s: float, action: Callable[[Outcome, float, float], None]
    ) -> Outcome:
        """Run `action(outcome, start, deadline)` as the step `name`, profiled with py-spy
        if `--profile-steps` names it; print what it took."""
        outcome = Outcome(name, timeout_s)
        profile = self.args.profile if name in self.args.profile_steps else None
        before = snapshot(self.cluster)
        with profiled(self.cluster, profile, f"{self.label}-{name}"):
            start = time.monotonic()
            try:
                action(outcome, start, start + timeout_s)
                outcome.wall_s = time.monotonic() - start
            except TimeoutError as e:
                outcome.note = f"timed out: {e}"
        outcome.usage = usage_between(before, snapshot(self.cluster))
        if outcome.usage.zookeeper_requests is not None:
            outcome.usage.zookeeper_requests -= outcome.own_zookeeper_reads
        marks = ", ".join(
            f"{k} {'>' if v is None else ''}{timeout_s if v is None else v:.2f} s"
            for k, v in outcome.marks.items()
        )
        print(
            f"[{self.label}] {name}: {outcome.wall()}"
            f"{f' ({marks})' if marks else ''}{f'; {outcome.note}' if outcome.note else ''}\n"
            f"    {outcome.usage.summary()}",
            flush=True,
        )
        self.outcomes[name] = outcome
        return outcome

    def mark(self, outcome: Outcome, what: str, start: float) -> None:
        outcome.marks[what] = time.monotonic() - start

    # -- the steps ----------------------------------------------------------------------------

    def create(self, outcome: Outcome, start: float, deadline: float) -> None:
        config = {"min.insync.replicas": "2"}
        futures = self.admin.create_topics(
            [NewTopic(t, n, 3, config=config) for t, n in self.topics.items()],
            operation_timeout=max(1.0, deadline - time.monotonic()),
            request_timeout=max(1.0, deadline - time.monotonic()),
        )
        for future in futures.values():
            future.result(max(1.0, deadline - time.monotonic()))
        self.mark(outcome, "answered", start)
        live = self.live()
        wait_until(lambda: self.all_led(live), deadline, "not every partition led", self.poll_s)
        self.mark(outcome, "led", start)
        wait_until(self.all_in_sync, deadline, "ISRs not full", self.poll_s)

    def warm_producer(self, acks: str) -> Producer:
        """A producer that has the sweep's metadata and has written through every leader."""
        producer = Producer(
            {
                "bootstrap.servers": self.cluster.bootstrap,
                "acks": acks,
                "linger.ms": 20,
                "enable.idempotence": False,
                "queue.buffering.max.messages": 1_000_000,
                "log_level": 4,  # not the disconnects a killed broker causes later
                "message.timeout.ms": int(self.args.round_timeout_s * SECOND_MS),
            }
        )
        # The broker answering may not have every topic's UpdateMetadata yet (100 topics
        # created at once are 100 of them): ask again until it names them all.
        give_up = time.monotonic() + 30
        md = producer.list_topics(timeout=30)
        while any(t not in md.topics for t in self.topics) and time.monotonic() < give_up:
            time.sleep(self.poll_s)
            md = producer.list_topics(timeout=30)
        through: dict[int, tuple[str, int]] = {}
        for topic in self.topics:
            for p in md.topics[topic].partitions.values():
                through.setdefault(p.leader, (topic, p.id))
        for topic, partition in through.values():
            producer.produce(topic, VALUE, partition=partition)
        if producer.flush(60):
            raise RuntimeError(f"acks={acks}: the warm-up writes were not acknowledged")
        return producer

    def round(self, producer: Producer) -> Callable[[Outcome, float, float], None]:
        def run(outcome: Outcome, start: float, deadline: float) -> None:
            failed = []

            def delivered(err, _msg) -> None:
                if err is not None:
                    failed.append(err)

            for topic, count in self.topics.items():
                for partition in range(count):
                    producer.produce(topic, VALUE, partition=partition, on_delivery=delivered)
            if producer.flush(max(0.0, deadline - time.monotonic())):
                raise TimeoutError("records not all acknowledged")
            if failed:
                outcome.note = f"{len(failed)} failed: {failed[0]}"

        return run

    def settle(self) -> None:
        """Before the idle sample: the brokers' leader-epoch files of the partitions just
        created are written by their ticks in slices (kafka_log_leader_epoch_files_pending),
        work of the create that would otherwise be counted as idle; then `settle_s`."""
        start = time.monotonic()
        pending = lambda i: gauge(self.cluster, i, "kafka_log_leader_epoch_files_pending")  # noqa: E731
        wait_until(
            lambda: all(pending(i) == 0 for i in self.live()),
            start + SETTLE_TIMEOUT_S,
            "leader-epoch files still pending",
            1.0,
        )
        print(f"[{self.label}] leader-epoch files written {time.monotonic() - start:.1f} s "
              "after the create's step", flush=True)  # fmt: skip
        time.sleep(self.args.settle_s)

    def idle(self, outcome: Outcome, start: float, deadline: float) -> None:
        time.sleep(self.args.idle_s)
        rss = {i: rss_mib(self.cluster.broker(i).proc.pid) for i in sorted(self.live())}
        outcome.note = "RSS MiB " + ", ".join(f"b{i} {m:.0f}" for i, m in rss.items())
        outcome.marks = {}

    def kill_one(self, victim: int) -> Callable[[Outcome, float, float], None]:
        def run(outcome: Outcome, start: float, deadline: float) -> None:
            self.cluster.kill(victim)
            self.expired(victim, outcome, start, deadline)
            live = self.live()
            wait_until(lambda: self.all_led(live), deadline, "a partition unled", self.poll_s)

        return run

    def expired(self, victim: int, outcome: Outcome, start: float, deadline: float) -> None:
        """Mark when ZooKeeper dropped the victim's session (its registration gone): what
        comes before is ZooKeeper's expiry (session timeout, rounded up to its tick), what
        comes after is the cluster's work."""
        path = f"/brokers/ids/{victim}"

        def gone() -> bool:
            outcome.own_zookeeper_reads += 1
            return self.zookeeper.exists(path) is None

        wait_until(gone, deadline, "session never expired", 0.02)
        self.mark(outcome, "expired", start)

    def start_again(self, broker_id: int) -> Callable[[Outcome, float, float], None]:
        """Start the stopped broker: to serving, registered, every ISR full."""

        def run(outcome: Outcome, start: float, deadline: float) -> None:
            old = read_registrations(self.zookeeper).get(broker_id)
            broker = self.cluster.broker(broker_id)
            broker.spawn()
            wait_until(lambda: port_answers(broker.port), deadline, "not serving", 0.02)
            self.mark(outcome, "serving", start)

            def registered() -> bool:
                now = read_registrations(self.zookeeper).get(broker_id)
                return now is not None and (old is None or now.epoch > old.epoch)

            wait_until(registered, deadline, "not registered", 0.02)
            self.mark(outcome, "registered", start)
            wait_until(self.all_in_sync, deadline, "ISRs not full", self.poll_s)

        return run

    def kill_controller(self, outcome: Outcome, start: float, deadline: float) -> None:
        old = self.controller()
        outcome.note = f"controller was broker {old}"
        self.cluster.kill(old)
        self.expired(old, outcome, start, deadline)
        wait_until(lambda: self.controller() not in (None, old), deadline, "no new controller")
        self.mark(outcome, "elected", start)
        live = self.live()
        wait_until(lambda: self.all_led(live), deadline, "a partition unled", self.poll_s)

    def shutdown(self, broker_id: int) -> Callable[[Outcome, float, float], None]:
        def run(outcome: Outcome, start: float, deadline: float) -> None:
            code = self.cluster.broker(broker_id).stop(max(1.0, deadline - time.monotonic()))
            if code != 0:
                outcome.note = f"exit code {code}"

        return run

    def run(self) -> dict[str, Outcome]:
        a, steps = self.args, self.args.steps
        created = self.step("create", a.create_timeout_s, self.create)
        if created.wall_s is None:
            return self.outcomes
        if "acks" in steps:
            ones, alls = self.warm_producer("1"), self.warm_producer("all")
            self.step("acks-1", a.round_timeout_s, self.round(ones))
            self.step("acks-all", a.round_timeout_s, self.round(alls))
            ones.flush(10)
            alls.flush(10)
        if "idle" in steps:
            self.settle()
            self.step("idle", a.idle_s + 30, self.idle)
        failover_budget = (a.session_timeout_ms + 3 * SECOND_MS) / SECOND_MS
        controller = self.controller()
        victim = next(i for i in self.cluster.ids if i != controller)
        if "failover" in steps:
            self.step("failover", a.failover_timeout_s, self.kill_one(victim))
            self.step("restart", a.restart_timeout_s, self.start_again(victim))
        if "controller" in steps:
            controller = self.controller()
            self.step("controller", a.failover_timeout_s, self.kill_controller)
            self.step("controller-restart", a.restart_timeout_s, self.start_again(controller))
        if "startup" in steps:
            target = next(i for i in self.cluster.ids if i != self.controller())
            self.step("shutdown", a.restart_timeout_s, self.shutdown(target))
            self.step("startup", a.restart_timeout_s, self.start_again(target))
        if "acks" in steps and self.outcomes["acks-all"].wall_s and self.outcomes["acks-1"].wall_s:
            ratio = self.outcomes["acks-all"].wall_s / self.outcomes["acks-1"].wall_s
            print(f"[{self.label}] acks=all round / acks=1 round: {ratio:.1f}")
        for name in ("failover", "controller"):
            if name in self.outcomes and self.outcomes[name].wall_s is not None:
                ratio = self.outcomes[name].wall_s / failover_budget
                print(
                    f"[{self.label}] {name} / (zookeeper.session.timeout.ms + 3 s = "
                    f"{failover_budget:.0f} s): {ratio:.2f} (target <= 1)"
                )
        return self.outcomes


def topics_for(partitions: int, layout: str) -> dict[str, int]:
    if layout == "one":
        return {f"sweep-{partitions}": partitions}
    return {
        f"sweep-{partitions}-{i:03d}": partitions // SPREAD_TOPICS for i in range(SPREAD_TOPICS)
    }


def summary(results: dict[tuple[str, int], dict[str, Outcome]], idle_s: float) -> None:
    """Every step at every size, with its growth against the run's smallest size."""
    print("\n== summary (wall s; CPU s per broker, max; x/partition = growth / partitions) ==")
    print("| layout | partitions | step | wall s | x/partition | CPU s max | x/partition |")
    for layout in sorted({layout for layout, _ in results}):
        sizes = sorted(n for lay, n in results if lay == layout)
        base_n = sizes[0]
        base = results[(layout, base_n)]
        for n in sizes:
            for name, o in results[(layout, n)].items():
                cpu = max(o.usage.cpu.values(), default=float("nan"))
                b = base.get(name)
                growth = grow_cpu = "-"
                if n != base_n and b is not None and b.wall_s and o.wall_s is not None:
                    growth = f"{o.wall_s / b.wall_s / (n / base_n):.2f}"
                if n != base_n and b is not None and b.usage.cpu:
                    base_cpu = max(b.usage.cpu.values())
                    if base_cpu > 0:
                        grow_cpu = f"{cpu / base_cpu / (n / base_n):.2f}"
                extra = ""
                if name == "idle":
                    extra = (
                        " ("
                        + ", ".join(
                            f"b{i} {s / idle_s * 100:.1f} %" for i, s in sorted(o.usage.cpu.items())
                        )
                        + f"; {o.note})"
                    )
                print(
                    f"| {layout} | {n:,} | {name} | {o.wall()} | {growth} | {cpu:.2f}{extra} | "
                    f"{grow_cpu} |"
                )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", default="10,100,1000", help="comma-separated sizes")
    parser.add_argument("--layouts", default="one,spread", help="one, spread (100 topics)")
    parser.add_argument("--steps", default=",".join(STEPS), help="comma-separated; create always")
    parser.add_argument("--idle-s", type=float, default=10.0)
    parser.add_argument("--settle-s", type=float, default=5.0, help="before the idle sample")
    parser.add_argument("--create-timeout-s", type=float, default=300.0)
    parser.add_argument("--round-timeout-s", type=float, default=120.0)
    parser.add_argument("--failover-timeout-s", type=float, default=60.0)
    parser.add_argument("--restart-timeout-s", type=float, default=180.0)
    parser.add_argument("--session-timeout-ms", type=int, default=6000)
    parser.add_argument("--zookeeper-tick-ms", type=int, default=2000)
    parser.add_argument("--profile", type=Path, help="py-spy's collapsed stacks go here")
    parser.add_argument(
        "--profile-steps", default="", help="steps to profile, e.g. create,acks-all,idle"
    )
    parser.add_argument("--work", type=Path, help="keep the clusters' files and logs here")
    args = parser.parse_args()
    args.steps = set(args.steps.split(","))
    args.profile_steps = set(filter(None, args.profile_steps.split(",")))
    if args.steps - set(STEPS):
        parser.error(f"--steps: unknown {sorted(args.steps - set(STEPS))}; known {STEPS}")
    sizes = [int(n) for n in args.partitions.split(",")]
    results: dict[tuple[str, int], dict[str, Outcome]] = {}
    for layout in args.layouts.split(","):
        for n in sizes:
            if layout == "spread" and n < SPREAD_TOPICS:
                continue
            print(f"\n== {n:,} partitions, {layout} layout, RF=3, 3 brokers ==", flush=True)
            work = args.work / f"{layout}-{n}" if args.work else None
            with (
                running_cluster(
                    3,
                    work,
                    args.zookeeper_tick_ms,
                    broker_overrides=metrics_overrides([0, 1, 2]),
                    **{"zookeeper.session.timeout.ms": str(args.session_timeout_ms)},
                ) as cluster,
                kazoo_session(cluster.zookeeper_connect) as zookeeper,
            ):
                results[(layout, n)] = Sweep(cluster, zookeeper, topics_for(n, layout), args).run()
    summary(results, args.idle_s)


if __name__ == "__main__":
    main()
