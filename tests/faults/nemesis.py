"""Nemeses: faults injected into a running cluster on a schedule drawn from a seeded RNG.

A nemesis has `inject(env, rng) -> undo` and `heal(env, undo)`; `Schedule` runs it in a
thread: wait a random gap, inject, hold the fault a random while, heal, again, until
stopped (then heals whatever is still injected). Every injection and heal is recorded in
the history as process "nemesis", with the broker (or server) it hit.

Targets are resolved when the fault starts, from what the cluster says then: the leader or
a follower of the workload's topic partition 0, the controller (`/controller`), the group
coordinator of the workload's group, the transaction coordinator of its transactional id,
ZooKeeper, the registry instance that leads.

Faults: SIGKILL (then a restart), SIGSTOP/SIGCONT (a pause: the process wakes up as a
zombie), a network partition (brokers in namespaces: tests/helpers/netns.py), clock skew
(libfaketime, brokers started under it: `faketime_prefix`), a full disk (log dirs on a
small tmpfs: `mount_tmpfs`), lost unflushed writes (SIGKILL, then the partition
directories truncated to the broker's recovery point, as after a power cut: what the OS
had not flushed is gone).
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from broker.log.checkpoint import RECOVERY_POINT_FILE, read_checkpoint
from broker.processes import Cluster, Host
from broker.records.batch import iter_batches
from tests.faults.history import History
from tests.helpers.cluster import partition_state, wait_for

FAKETIME_LIB = Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1")


@dataclass
class Env:
    """What a nemesis acts on: the cluster, the workload's topic and group, extra servers
    (registry instances), the network of namespaced hosts (partitions) and the clock files
    (skew) when the cluster has them."""

    cluster: Cluster
    topic: str
    history: History
    group: str | None = None
    transactional_id: str | None = None
    registries: list = field(default_factory=list)
    network: object = None
    clock_files: dict[int, Path] = field(default_factory=dict)
    fill_dirs: dict[int, Path] = field(default_factory=dict)

    # -- roles -----------------------------------------------------------------------------

    def leader(self) -> int:
        leader, _, _ = wait_for(
            lambda: (s := self._state()) and s[0] >= 0 and s, f"a leader of {self.topic}-0"
        )
        return leader

    def follower(self, rng: random.Random) -> int:
        leader, _, isr = wait_for(
            lambda: (s := self._state()) and s[0] >= 0 and s, f"a leader of {self.topic}-0"
        )
        others = [b for b in self.running() if b != leader]
        return rng.choice(sorted(set(others) & set(isr)) or others)

    def controller(self) -> int:
        # Broker 0 may be the controller: wait for "not None", not for a truthy id.
        found = wait_for(
            lambda: (c := self.cluster.controller()) is not None and (c,), "a controller"
        )
        return found[0]

    def coordinator(self) -> int:
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": self.cluster.bootstrap})
        described = admin.describe_consumer_groups([self.group])[self.group].result(30)
        return described.coordinator.id

    def txn_coordinator(self) -> int:
        """The leader of the transactional id's `__transaction_state` partition."""
        from confluent_kafka.admin import AdminClient

        from broker.transactions.state_topic import TRANSACTION_STATE_TOPIC, partition_for

        admin = AdminClient({"bootstrap.servers": self.cluster.bootstrap})
        topics = admin.list_topics(TRANSACTION_STATE_TOPIC, timeout=10).topics
        count = len(topics[TRANSACTION_STATE_TOPIC].partitions)
        partition = partition_for(self.transactional_id, count)
        leader, _, _ = wait_for(
            lambda: (s := self._state(TRANSACTION_STATE_TOPIC, partition)) and s[0] >= 0 and s,
            f"a leader of {TRANSACTION_STATE_TOPIC}-{partition}",
        )
        return leader

    def running(self) -> list[int]:
        return [i for i in self.cluster.ids if self.cluster.broker(i).proc is not None]

    def _state(self, topic: str | None = None, partition: int = 0):
        try:
            return partition_state(self.cluster.bootstrap, topic or self.topic, partition)
        except Exception:  # noqa: BLE001 - a broker down or paused: ask again
            return None

    def resolve(self, role: str, rng: random.Random) -> int:
        if role == "leader":
            return self.leader()
        if role == "follower":
            return self.follower(rng)
        if role == "controller":
            return self.controller()
        if role == "coordinator":
            return self.coordinator()
        if role == "txn-coordinator":
            return self.txn_coordinator()
        if role == "any":
            return rng.choice(self.running())
        raise ValueError(f"unknown role {role!r}")

    def server(self, role: str, rng: random.Random):
        """(name, process) of a role that may also be ZooKeeper or a registry instance."""
        if role == "zookeeper":
            return "zookeeper", self.cluster.zookeeper
        if role == "registry-leader":
            from tests.faults.workloads import registry_leader

            index = registry_leader(self.registries)
            return f"registry-{index}", self.registries[index]
        broker_id = self.resolve(role, rng)
        return f"broker-{broker_id}", self.cluster.broker(broker_id)


class Nemesis:
    name = "none"
    # How long a fault is held, when it matters more than the schedule's: a pause must
    # outlast the ZooKeeper session (6 s) and the registry's (4 s) to make a zombie.
    hold_s: tuple[float, float] | None = None

    def inject(self, env: Env, rng: random.Random):
        return None

    def heal(self, env: Env, undo) -> None:
        pass


class Kill(Nemesis):
    """SIGKILL a role's process; heal: start it again (same id, dirs, port)."""

    def __init__(self, role: str) -> None:
        self.role = role
        self.name = f"kill-{role}"

    def inject(self, env, rng):
        name, server = env.server(self.role, rng)
        server.kill()
        return name, server

    def heal(self, env, undo):
        name, server = undo
        restart(env, name, server)


def restart(env: Env, name: str, server) -> None:
    if name.startswith("broker-"):
        env.cluster.restart(int(name.split("-")[1]))
    else:
        server.start()


class Pause(Nemesis):
    """SIGSTOP a role's process; heal: SIGCONT. The process keeps its sockets, sessions
    and beliefs (its leaderships, its registry leadership) while time passes for others."""

    hold_s = (7.0, 9.0)

    def __init__(self, role: str) -> None:
        self.role = role
        self.name = f"pause-{role}"

    def inject(self, env, rng):
        name, server = env.server(self.role, rng)
        os.kill(server.proc.pid, signal.SIGSTOP)
        return name, server

    def heal(self, env, undo):
        _, server = undo
        if server.proc is not None:
            os.kill(server.proc.pid, signal.SIGCONT)


class Partition(Nemesis):
    """Needs a cluster on namespaced hosts (`env.network`). "leader-minority": the leader
    on one side, ZooKeeper and the other brokers on the other (clients, on the machine,
    reach both sides); "leader-from-zookeeper": only the leader and ZooKeeper cut apart
    (the leader still reaches its followers: a bridge); "leader-one-way": nothing the
    leader sends reaches ZooKeeper or the other brokers, while what they send reaches it
    (`TestNetwork.partition_one_way`)."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.name = f"partition-{kind}"

    def inject(self, env, rng):
        leader = env.leader()
        hosts = env.cluster.hosts
        zk = env.cluster.zookeeper.host
        side = [hosts[leader]]
        if self.kind == "leader-minority":
            other = [zk, *(hosts[b] for b in env.cluster.ids if b != leader)]
        elif self.kind == "leader-from-zookeeper":
            other = [zk]
        elif self.kind == "leader-one-way":
            other = [zk, *(hosts[b] for b in env.cluster.ids if b != leader)]
            env.network.partition_one_way(side, other)
            return f"broker-{leader} (one way)", (side, other)
        else:
            raise ValueError(self.kind)
        env.network.partition(side, other)
        return f"broker-{leader}", (side, other)

    def heal(self, env, undo):
        _, (side, other) = undo
        if self.kind == "leader-one-way":
            env.network.heal_partition_one_way(side, other)
        else:
            env.network.heal_partition(side, other)


def faketime_unavailable() -> str | None:
    if not FAKETIME_LIB.exists():
        return f"libfaketime is not installed ({FAKETIME_LIB}: `apt-get install faketime`)"
    return None


def faketime_prefix(clock_file: Path) -> Host:
    """A host (this machine's loopback) whose processes run under libfaketime, reading their
        offset from `clock_file` ("+0" for none), read again at most every second (reading it
    on every call slows the broker's start several times over). Only the wall clock is
        moved: monotonic clocks stay true, as NTP steps only the wall clock."""
    clock_file.write_text("+0\n")
    return Host(
        command_prefix=(
            "env",
            f"LD_PRELOAD={FAKETIME_LIB}",
            f"FAKETIME_TIMESTAMP_FILE={clock_file}",
            "FAKETIME_CACHE_DURATION=1",
            "DONT_FAKE_MONOTONIC=1",
        )
    )


class ClockSkew(Nemesis):
    """Move a role's wall clock by a random amount up to `max_s` either way (a broker
    started under `faketime_prefix`); heal: back to the true time (a step backwards)."""

    def __init__(self, role: str, max_s: int = 600) -> None:
        self.role = role
        self.max_s = max_s
        self.name = f"clock-skew-{role}"

    def inject(self, env, rng):
        broker = env.resolve(self.role, rng)
        skew = rng.choice([-1, 1]) * rng.randint(self.max_s // 4, self.max_s)
        env.clock_files[broker].write_text(f"{skew:+d}\n")
        return f"broker-{broker} {skew:+d}s", broker

    def heal(self, env, undo):
        _, broker = undo
        env.clock_files[broker].write_text("+0\n")


def mount_tmpfs(path: Path, size: str = "24m") -> None:
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], check=True)


def unmount(path: Path) -> None:
    subprocess.run(["umount", "-l", str(path)], check=False)


def tmpfs_unavailable() -> str | None:
    if os.geteuid() != 0:
        return "mounting a tmpfs needs root"
    if shutil.which("mount") is None:
        return "no `mount` command"
    return None


class DiskFull(Nemesis):
    """Fill a role's log dir (a tmpfs: `mount_tmpfs`, `env.fill_dirs`) to the last byte
    with a file of its own; heal: delete it, and start the broker again if it halted."""

    def __init__(self, role: str) -> None:
        self.role = role
        self.name = f"disk-full-{role}"

    def inject(self, env, rng):
        broker = env.resolve(self.role, rng)
        filler = env.fill_dirs[broker] / "filler.bin"
        chunk = b"\0" * (1 << 20)
        with open(filler, "wb") as out:
            try:
                while True:
                    out.write(chunk)
                    out.flush()
            except OSError:
                pass
        try:  # the last partial MiB
            with open(filler, "ab") as out:
                while True:
                    out.write(b"\0" * 4096)
                    out.flush()
        except OSError:
            pass
        return f"broker-{broker}", (broker, filler)

    def heal(self, env, undo):
        _, (broker, filler) = undo
        filler.unlink(missing_ok=True)
        # A broker whose only log dir failed halts, as Kafka's does (docs/contracts/log.md,
        # "Log directory failure"): once space is freed an operator starts it again.
        process = env.cluster.broker(broker).proc
        if process is not None and process.poll() is not None:
            env.cluster.restart(broker)


def truncate_to_recovery_point(log_dir: Path) -> dict[str, tuple[int, int]]:
    """What a power cut leaves of a stopped broker's log dir: each partition directory cut
    back to the broker's last recovery point (`recovery-point-offset-checkpoint`; the
    batches below it were fsynced, those above may be gone). Segments wholly above it are
    deleted, the one holding it cut after its last batch below it; their indexes are
    deleted (the broker rebuilds them). partition -> (recovery point, bytes dropped)."""
    points = read_checkpoint(log_dir / RECOVERY_POINT_FILE)
    dropped: dict[str, tuple[int, int]] = {}
    for directory in sorted(p for p in log_dir.iterdir() if p.is_dir() and "-" in p.name):
        topic, _, partition = directory.name.rpartition("-")
        if not partition.isdigit():
            continue
        point = points.get((topic, int(partition)), 0)
        lost = 0
        for segment in sorted(directory.glob("*.log"), key=lambda p: int(p.stem)):
            data = segment.read_bytes()
            keep = 0
            for pos, header in iter_batches(data):
                if header.base_offset + header.last_offset_delta >= point:
                    break
                keep = pos + header.size
            if keep < len(data):
                lost += len(data) - keep
                if keep == 0 and int(segment.stem) > 0 and int(segment.stem) >= point:
                    segment.unlink()
                else:
                    with open(segment, "r+b") as f:
                        f.truncate(keep)
                for suffix in (".index", ".timeindex"):
                    segment.with_suffix(suffix).unlink(missing_ok=True)
        for snapshot in directory.glob("*.snapshot"):
            if int(snapshot.stem) > point:
                snapshot.unlink()
        if lost:
            dropped[directory.name] = (point, lost)
    return dropped


class LoseUnflushed(Nemesis):
    """SIGKILL a role's broker and cut its log dir back to its recovery point (a power
    cut); heal: start it again."""

    def __init__(self, role: str) -> None:
        self.role = role
        self.name = f"lose-unflushed-{role}"

    def inject(self, env, rng):
        broker = env.resolve(self.role, rng)
        # Said in the history: a controller's power cut meets docs/faults.md, F1.
        role = " (the controller)" if env.cluster.controller() == broker else ""
        env.cluster.kill(broker)
        dropped = truncate_to_recovery_point(env.cluster.broker(broker).log_dir)
        mine = {k: v for k, v in dropped.items() if k.startswith(env.topic)}
        return f"broker-{broker}{role} cut {mine}", broker

    def heal(self, env, undo):
        _, broker = undo
        env.cluster.restart(broker)


NEMESES = {
    n.name: n
    for n in [
        Nemesis(),
        *(Kill(r) for r in ("leader", "follower", "controller", "coordinator", "zookeeper")),
        *(Pause(r) for r in ("leader", "follower", "controller", "coordinator", "zookeeper")),
        Kill("txn-coordinator"),
        Pause("txn-coordinator"),
        Kill("registry-leader"),
        Pause("registry-leader"),
        Partition("leader-minority"),
        Partition("leader-from-zookeeper"),
        Partition("leader-one-way"),
        ClockSkew("leader"),
        ClockSkew("follower"),
        DiskFull("leader"),
        LoseUnflushed("leader"),
        LoseUnflushed("follower"),
        LoseUnflushed("controller"),  # leads partitions too: docs/faults.md, F1
    ]
}


class Schedule:
    """Runs a nemesis in a thread: a gap, a fault held for a while, a heal, and again,
    each length drawn from `rng` in [lo, hi] seconds, until `stop()` (which heals what is
    still injected and waits for the thread)."""

    def __init__(
        self,
        nemesis: Nemesis,
        env: Env,
        rng: random.Random,
        *,
        gap_s: tuple[float, float] = (0.5, 1.5),
        hold_s: tuple[float, float] = (1.0, 3.0),
        faults: int | None = None,
    ) -> None:
        self.nemesis = nemesis
        self.env = env
        self.rng = rng
        self.gap_s = gap_s
        self.hold_s = nemesis.hold_s or hold_s
        self.faults = faults
        self.injected = 0
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"nemesis-{nemesis.name}")

    def start(self) -> Schedule:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def done(self) -> bool:
        return not self._thread.is_alive()

    def _run(self) -> None:
        history, name = self.env.history, self.nemesis.name
        while not self._stop.wait(self.rng.uniform(*self.gap_s)):
            if self.faults is not None and self.injected >= self.faults:
                return
            history.invoke(name, "nemesis")
            try:
                undo = self.nemesis.inject(self.env, self.rng)
            except Exception as exc:  # noqa: BLE001 - a fault that could not start is noted
                history.fail(name, "nemesis", repr(exc))
                self.errors.append(f"inject: {exc!r}")
                continue
            self.injected += 1
            history.ok(name, "nemesis", undo[0] if isinstance(undo, tuple) else undo)
            self._stop.wait(self.rng.uniform(*self.hold_s))
            history.invoke("heal", "nemesis", name)
            try:
                self.nemesis.heal(self.env, undo)
                history.ok("heal", "nemesis", name)
            except Exception as exc:  # noqa: BLE001
                history.fail("heal", "nemesis", repr(exc))
                self.errors.append(f"heal: {exc!r}")
            if self.faults is not None and self.injected >= self.faults:
                return
        return


class SlowDisk(Nemesis):
    """Slow down a role's log dir, a FUSE passthrough mounted before its broker started
    (tests/faults/slow_disk.py; the `slow_disk_cluster` fixture): each write sleeps
    `write_ms`, each fsync `fsync_ms` (drawn per fault); heal: no sleeps again. The disk
    stays correct, only slow: nothing may be lost, and a leader too slow for its followers'
    fetches to keep them in sync shrinks its ISR, as Kafka's does."""

    def __init__(self, role: str, write_ms=(100, 500), fsync_ms=(200, 1000)) -> None:
        self.role = role
        self.write_ms, self.fsync_ms = write_ms, fsync_ms
        self.name = f"slow-disk-{role}"

    def inject(self, env, rng):
        from tests.faults import slow_disk

        broker = env.resolve(self.role, rng)
        control = slow_disk.control_file(env.cluster.broker(broker).log_dir)
        if not control.exists():
            raise RuntimeError(f"broker-{broker}'s log dir is not on a slow disk ({control})")
        write_ms, fsync_ms = rng.randint(*self.write_ms), rng.randint(*self.fsync_ms)
        slow_disk.set_delay(control, write_ms=write_ms, fsync_ms=fsync_ms)
        return f"broker-{broker} write {write_ms} ms fsync {fsync_ms} ms", control

    def heal(self, env, undo):
        from tests.faults import slow_disk

        slow_disk.set_delay(undo[1])


NEMESES[SlowDisk("leader").name] = SlowDisk("leader")


class FailingDisk(Nemesis):
    """A role's log dir (a FUSE passthrough, as for `SlowDisk`) fails every write and
    fsync with EIO: its broker must answer KAFKA_STORAGE_ERROR and take the dir offline
    (docs/contracts/log.md, "Log directory failure"); with its only log dir gone it halts,
    and the controller moves its leaderships. Heal, as an operator would: once the
    leadership of partition 0 left it (or after `wait_s`), the disk works again and the
    broker is started again if it halted. `moved_to`: where that leadership went."""

    def __init__(self, role: str, failing=("write", "fsync"), wait_s: float = 30.0) -> None:
        self.role = role
        self.failing = failing
        self.wait_s = wait_s
        self.name = f"failing-disk-{role}"
        self.moved_to: int | None = None

    def inject(self, env, rng):
        from tests.faults import slow_disk

        broker = env.resolve(self.role, rng)
        control = slow_disk.control_file(env.cluster.broker(broker).log_dir)
        if not control.exists():
            raise RuntimeError(f"broker-{broker}'s log dir is not on a FUSE disk ({control})")
        slow_disk.set_delay(control, eio=self.failing)
        return f"broker-{broker} EIO on {','.join(self.failing)}", (broker, control)

    def heal(self, env, undo):
        from tests.faults import slow_disk

        broker, control = undo[1]
        deadline = time.monotonic() + self.wait_s
        while time.monotonic() < deadline:
            state = env._state()  # the state, not the new leader's id (broker 0 is falsy)
            if state is not None and state[0] not in (-1, broker):
                self.moved_to = state[0]
                break
            time.sleep(0.2)
        slow_disk.set_delay(control)
        process = env.cluster.broker(broker).proc
        if process is not None and process.poll() is not None:
            env.cluster.restart(broker)


NEMESES[FailingDisk("leader").name] = FailingDisk("leader")
