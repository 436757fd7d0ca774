"""The fault campaign's soak (issue 27; report: docs/faults.md): each workload against
each nemesis that applies to it, `--runs` times with seeds `--seed`, `--seed + 1`, ...,
on clusters of broker processes and ZooKeeper; prints one table row per run (workload,
nemesis, seed, operations, faults injected, anomalies) and every anomaly found.

    .venv/bin/python -m bench.bench_faults [--runs 2] [--seed 1000] [--faults 2]
        [--fault-seconds 3] [--workloads producer,group,transactions,registry,hourly]
        [--nemeses all|a,b] [--work DIR]

Needs root for the tmpfs (disk full) and namespaces (partitions), libfaketime for clock
skew (`apt-get install faketime`); nemeses whose needs are missing are skipped, saying
why. The harness is tests/faults/ (the quick variants are its tests). Histories are
written to `<work>/histories/` (one JSON object per operation).
"""

from __future__ import annotations

import argparse
import contextlib
import tempfile
import time
from pathlib import Path

from broker.processes import Cluster, ZooKeeperProcess
from tests.faults import campaign, nemesis, slow_disk
from tests.faults.nemesis import NEMESES
from tests.helpers.netns import TestNetwork, netns_unavailable

APPLIES = {
    "producer": [
        "none", "kill-leader", "kill-follower", "kill-controller", "kill-zookeeper",
        "pause-leader", "pause-follower", "pause-controller", "pause-zookeeper",
        "partition-leader-minority", "partition-leader-from-zookeeper", "clock-skew-leader",
        "clock-skew-follower", "disk-full-leader", "lose-unflushed-leader",
        "lose-unflushed-follower", "last-replica-standing",
        "last-replica-standing-min-isr-2", "slow-disk-leader", "failing-disk-leader",
        "partition-leader-one-way",
    ],
    "group": [
        "none", "kill-coordinator", "pause-coordinator", "kill-controller", "pause-zookeeper",
        "kill-leader", "pause-leader", "partition-leader-minority", "clock-skew-leader",
        "disk-full-leader", "lose-unflushed-leader", "failing-disk-leader",
        "partition-leader-one-way",
    ],
    "transactions": [
        "none", "kill-leader", "kill-txn-coordinator", "pause-txn-coordinator",
        "kill-coordinator", "pause-leader", "kill-controller", "lose-unflushed-leader",
        "partition-leader-minority", "disk-full-leader", "pause-zookeeper",
        "failing-disk-leader", "partition-leader-one-way",
    ],
    "registry": [
        "none", "pause-registry-leader", "kill-registry-leader", "kill-leader",
        "pause-leader", "kill-controller", "pause-zookeeper", "kill-zookeeper",
        "partition-leader-minority", "clock-skew-leader", "disk-full-leader",
        "lose-unflushed-leader", "failing-disk-leader", "partition-leader-one-way",
    ],
    # The hourly load (docs/faults.md, "Workloads"): the faults of the brokers it reads
    # from and of ZooKeeper. Not the coordinators' (it uses no group and no transactions:
    # its offsets are in its own manifests), not the registry's (the registry workload's;
    # here one instance the load only reads), not the last replica standing (a loss in
    # Kafka before any load, the producer workload's F6/F7).
    "hourly": [
        "none", "kill-leader", "kill-follower", "kill-controller", "kill-zookeeper",
        "pause-leader", "pause-follower", "pause-controller", "pause-zookeeper",
        "partition-leader-minority", "partition-leader-from-zookeeper", "clock-skew-leader",
        "clock-skew-follower", "disk-full-leader", "lose-unflushed-leader",
        "lose-unflushed-follower", "slow-disk-leader", "failing-disk-leader",
        "partition-leader-one-way",
    ],
}  # fmt: skip


class LastReplicaStanding(nemesis.Nemesis):
    """The followers of partition 0 killed, the leader alone in the ISR, then a power cut
    of the leader (lost unflushed writes), then everyone restarted, the leader first.
    With `min_isr=1` (the topic's min.insync.replicas lowered for the run) the lone leader
    acknowledges writes, and loses them with its page cache, as Kafka does; with the
    campaign's 2 it refuses them, and what is lost is only what the followers had before
    they dropped out of the ISR (docs/faults.md, F6 and F7)."""

    hold_s = (1.0, 1.0)

    def __init__(self, min_isr: int | None = 1) -> None:
        self.min_isr = min_isr
        self.name = "last-replica-standing" + ("" if min_isr == 1 else "-min-isr-2")

    def inject(self, env, rng):
        from confluent_kafka.admin import AdminClient, ConfigResource

        if self.min_isr is not None:
            admin = AdminClient({"bootstrap.servers": env.cluster.bootstrap})
            config = {"min.insync.replicas": str(self.min_isr)}
            resource = ConfigResource("topic", env.topic, set_config=config)
            admin.alter_configs([resource])[resource].result(30)
        leader = env.leader()
        followers = [b for b in env.running() if b != leader]
        for b in followers:
            env.cluster.kill(b)
        time.sleep(8)  # the ISR shrinks to the leader alone (replica.lag.time.max.ms 4 s)
        env.cluster.kill(leader)
        dropped = nemesis.truncate_to_recovery_point(env.cluster.broker(leader).log_dir)
        mine = {k: v for k, v in dropped.items() if k.startswith(env.topic)}
        return f"broker-{leader} last standing, cut {mine}", (leader, followers)

    def heal(self, env, undo):
        # `undo` is what inject returned: (what the history says, what heal needs).
        _, (leader, followers) = undo
        env.cluster.restart(leader)
        for b in followers:
            env.cluster.restart(b)


for _standing in (LastReplicaStanding(1), LastReplicaStanding(None)):
    NEMESES[_standing.name] = _standing


def kind_of(name: str) -> str:
    if name.startswith("disk-full"):
        return "disk"
    if name.startswith("clock-skew"):
        return "skew"
    if name.startswith(("slow-disk", "failing-disk")):
        return "slow"
    if name.startswith("partition"):
        return "netns"
    if name.endswith("zookeeper") or name.startswith("last-replica-standing"):
        # Its own cluster each run: a controller can lose its topics watch when ZooKeeper
        # goes (docs/faults.md, F2) and would fail every later run on that cluster; the
        # last replica standing leaves partitions offline by design.
        return "zk"
    return "plain"


class Clusters:
    """A cluster per kind, made when first needed and kept (disk and ZooKeeper clusters
    are made anew for every run: a filled tmpfs keeps what the run wrote; see `kind_of`)."""

    def __init__(self, work: Path, stack: contextlib.ExitStack) -> None:
        self.work, self.stack, self.made = work, stack, {}
        self.count = 0

    def unavailable(self, kind: str) -> str | None:
        return {
            "disk": nemesis.tmpfs_unavailable,
            "skew": nemesis.faketime_unavailable,
            "netns": netns_unavailable,
            "slow": slow_disk.unavailable,
        }.get(kind, lambda: None)()

    def get(self, kind: str) -> tuple[Cluster, dict]:
        if kind in self.made:
            return self.made[kind]
        self.count += 1
        work = self.work / f"{kind}-{self.count}"
        overrides = campaign.FAULT_CLUSTER
        if kind in ("plain", "zk"):
            made = (self.stack.enter_context(Cluster(work, 3, overrides=overrides)), {})
            if kind == "zk":
                return made  # not kept
        elif kind == "skew":
            files = {i: work / f"clock-{i}" for i in range(3)}
            work.mkdir(parents=True)
            hosts = {i: nemesis.faketime_prefix(f) for i, f in files.items()}
            c = Cluster(work, 3, overrides=overrides, hosts=hosts)
            made = (self.stack.enter_context(c), {"clock_files": files})
        elif kind == "netns":
            network = self.stack.enter_context(TestNetwork())
            zookeeper = ZooKeeperProcess(
                work / "zookeeper",
                host=network.add_host(f"zk{self.count}"),
                log_path=work / "logs" / "zookeeper.log",
            )
            hosts = {i: network.add_host(f"b{i}-{self.count}") for i in range(3)}
            c = Cluster(work, 3, zookeeper=zookeeper, hosts=hosts, overrides=overrides)
            self.stack.callback(network.heal_all)
            made = (self.stack.enter_context(c), {"network": network})
        elif kind == "disk":
            dirs = {i: work / f"broker-{i}" for i in range(3)}
            for path in dirs.values():
                nemesis.mount_tmpfs(path)
                self.stack.callback(nemesis.unmount, path)
            made = (self.stack.enter_context(Cluster(work, 3, overrides=overrides)),
                    {"fill_dirs": dirs})  # fmt: skip
            return made  # not kept
        elif kind == "slow":  # log dirs on FUSE passthroughs (tests/faults/slow_disk.py)
            for i in range(3):
                disk = slow_disk.SlowDisk(work / f"broker-{i}.backing", work / f"broker-{i}")
                self.stack.callback(disk.mount().unmount)
            return (self.stack.enter_context(Cluster(work, 3, overrides=overrides)), {})
        self.made[kind] = made
        return made


_spark = None


def spark():
    """One Spark session (`local[2]`, the load's default master) for every hourly run of
    the process: a load on it costs seconds, a new application's start would cost more
    than the run."""
    global _spark
    if _spark is None:
        from ingest.spark_runner import spark_session

        _spark = spark_session(
            "local[2]", "faults-hourly", {"spark.ui.showConsoleProgress": "false"}
        )
        _spark.sparkContext.setLogLevel("ERROR")
    return _spark


def run_one(clusters, workload, name, seed, args, work) -> campaign.Result:
    cluster, extra = clusters.get(kind_of(name))
    common = {"fault_s": args.fault_seconds, "faults": args.faults, "env_extra": extra}
    if name.startswith("last-replica-standing"):
        common["faults"] = 1
    if workload == "producer":
        return campaign.run_producer(cluster, NEMESES[name], seed, **common)
    if workload == "group":
        return campaign.run_group(cluster, NEMESES[name], seed, **common)
    if workload == "hourly":
        return campaign.run_hourly(cluster, NEMESES[name], seed, work, spark(), **common)
    if workload == "transactions":
        return campaign.run_transactions(cluster, NEMESES[name], seed, **common)
    return campaign.run_registry(cluster, NEMESES[name], seed, work, **common)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--seed", type=int, default=1000)
    parser.add_argument("--faults", type=int, default=2, help="faults per run")
    parser.add_argument("--fault-seconds", type=float, default=3.0)
    parser.add_argument("--workloads", default="producer,group,transactions,registry,hourly")
    parser.add_argument("--nemeses", default="all")
    parser.add_argument("--work", type=Path, default=None)
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="bench-faults-"))
    (work / "histories").mkdir(parents=True, exist_ok=True)
    wanted = None if args.nemeses == "all" else set(args.nemeses.split(","))
    print(f"work: {work}")
    print("| workload | nemesis | seed | operations | faults | anomalies |")
    print("|---|---|---|---|---|---|")
    details = []
    with contextlib.ExitStack() as stack:
        clusters = Clusters(work, stack)
        for workload in args.workloads.split(","):
            for name in APPLIES[workload]:
                if wanted is not None and name not in wanted:
                    continue
                reason = clusters.unavailable(kind_of(name))
                if reason:
                    print(f"| {workload} | {name} | - | skipped: {reason} | | |", flush=True)
                    continue
                for run in range(args.runs):
                    seed = args.seed + run
                    try:
                        result = run_one(clusters, workload, name, seed, args, work)
                    except Exception as exc:  # noqa: BLE001 - a run that broke is a finding
                        print(f"| {workload} | {name} | {seed} | error: {exc!r:.200} | | |",
                              flush=True)  # fmt: skip
                        continue
                    print(result.row(), flush=True)
                    result.history.dump(work / "histories" / f"{workload}-{name}-{seed}.jsonl")
                    if result.anomalies or result.notes:
                        faults = [op.value for op in result.history.faults() if op.type == "ok"]
                        details.append((workload, name, seed, result, faults))
    for workload, name, seed, result, faults in details:
        print(f"\n{workload} × {name}, seed {seed}: faults {faults}")
        for note in result.notes:
            print(f"  note: {note}")
        for anomaly in result.anomalies[:10]:
            print(f"  {anomaly}")


if __name__ == "__main__":
    main()
