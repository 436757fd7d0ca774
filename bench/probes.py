"""What the scale benchmarks read from a running cluster besides the clients' own view: the
CPU time and resident memory of each broker process (/proc), the requests each broker
received by API (its /metrics endpoint), ZooKeeper's request and write counters (its
`srvr` command), and py-spy profiles of the brokers while a step runs.

CPU seconds per broker for an operation are kept next to wall time: on a shared machine
wall time grows with the load of others, CPU time much less.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from broker.processes import Cluster, free_port

_TICKS = os.sysconf("SC_CLK_TCK")
_REQUESTS = re.compile(r'^kafka_requests_total\{api="([^"]+)",version="[^"]*"\} ([0-9.e+]+)$', re.M)


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time of the process so far (/proc/<pid>/stat utime, stime)."""
    return sum(cpu_times(pid))


def cpu_times(pid: int) -> tuple[float, float]:
    """User and system CPU time of the process so far (/proc/<pid>/stat utime, stime)."""
    with open(f"/proc/{pid}/stat") as f:
        # The command name (field 2) may hold spaces: split after its closing parenthesis.
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) / _TICKS, int(fields[12]) / _TICKS


def rss_mib(pid: int) -> float:
    """Resident set size of the process (VmRSS), MiB."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def metrics_overrides(cluster_ids: list[int]) -> dict[int, dict[str, str]]:
    """A metrics port of its own for each broker (they share a host), partition series off:
    a scrape then costs the same at 10 and at 10,000 partitions."""
    return {
        i: {"metrics.port": str(free_port()), "metrics.partition.series.enabled": "false"}
        for i in cluster_ids
    }


def _scrape(cluster: Cluster, broker_id: int) -> str | None:
    """The broker's /metrics text; None if it has no metrics port or does not answer."""
    port = cluster.broker(broker_id).overrides.get("metrics.port")
    if port is None:
        return None
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
            return answer.read().decode()
    except OSError:
        return None


def gauge(cluster: Cluster, broker_id: int, name: str) -> float | None:
    """One unlabelled gauge of the broker's /metrics; None if it cannot be read."""
    text = _scrape(cluster, broker_id)
    found = re.search(rf"^{re.escape(name)} ([0-9.e+-]+)$", text or "", re.M)
    return float(found.group(1)) if found else None


def requests_received(cluster: Cluster, broker_id: int) -> Counter[str] | None:
    """Requests the broker has received since it started, by API (kafka_requests_total);
    None if it does not answer."""
    text = _scrape(cluster, broker_id)
    if text is None:
        return None
    counts: Counter[str] = Counter()
    for api, value in _REQUESTS.findall(text):
        counts[api] += int(float(value))
    return counts


def zookeeper_counters(address: str) -> dict[str, int]:
    """ZooKeeper's `srvr` answer: requests received (every client's, pings included), and
    the last zxid, whose difference over a step is the number of writes (transactions:
    creates, sets, deletes, multi-ops as one, sessions opened and closed)."""
    host, port = address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=5) as s:
        s.sendall(b"srvr")
        data = b""
        while chunk := s.recv(4096):
            data += chunk
    text = data.decode()
    received = int(re.search(r"Received: (\d+)", text).group(1))
    zxid = int(re.search(r"Zxid: (0x[0-9a-f]+)", text).group(1), 16)
    return {"received": received, "zxid": zxid & 0xFFFFFFFF, "epoch": zxid >> 32}


@dataclass
class Snapshot:
    at: float
    pids: dict[int, int]
    cpu: dict[int, float]
    requests: dict[int, Counter[str] | None]
    zookeeper: dict[str, int] | None


def snapshot(cluster: Cluster, count_requests: bool = True) -> Snapshot:
    pids, cpu, requests = {}, {}, {}
    for broker_id in cluster.ids:
        proc = cluster.broker(broker_id).proc
        if proc is None or proc.poll() is not None:
            continue
        pids[broker_id] = proc.pid
        try:
            cpu[broker_id] = cpu_seconds(proc.pid)
        except OSError:
            continue
        requests[broker_id] = requests_received(cluster, broker_id) if count_requests else None
    try:
        zookeeper = zookeeper_counters(cluster.zookeeper.connect) if cluster.zookeeper else None
    except (OSError, AttributeError):
        zookeeper = None
    return Snapshot(time.monotonic(), pids, cpu, requests, zookeeper)


@dataclass
class Usage:
    """What a step cost: CPU seconds and requests received per broker (a broker started
    during the step counts from zero, a broker gone at its end is absent), ZooKeeper's
    requests and writes."""

    cpu: dict[int, float] = field(default_factory=dict)
    requests: dict[int, Counter[str]] = field(default_factory=dict)
    zookeeper_requests: int | None = None
    zookeeper_writes: int | None = None

    def requests_total(self) -> Counter[str]:
        total: Counter[str] = Counter()
        for counts in self.requests.values():
            total.update(counts)
        return total

    def summary(self, apis: tuple[str, ...] = ()) -> str:
        cpu = ", ".join(f"b{b} {s:.2f}" for b, s in sorted(self.cpu.items()))
        total = self.requests_total()
        shown = apis or tuple(api for api, _ in total.most_common())
        requests = ", ".join(f"{api} {total[api]:,}" for api in shown if total[api])
        zk = (
            f"ZooKeeper {self.zookeeper_requests:,} requests / {self.zookeeper_writes:,} writes"
            if self.zookeeper_requests is not None
            else "ZooKeeper -"
        )
        return f"CPU s [{cpu}]; requests received [{requests or '-'}]; {zk}"


def usage_between(before: Snapshot, after: Snapshot) -> Usage:
    usage = Usage()
    for broker_id, pid in after.pids.items():
        same = before.pids.get(broker_id) == pid
        if broker_id in after.cpu:
            usage.cpu[broker_id] = after.cpu[broker_id] - (before.cpu[broker_id] if same else 0)
        counts = after.requests.get(broker_id)
        if counts is not None:
            earlier = before.requests.get(broker_id) if same else None
            usage.requests[broker_id] = counts - (earlier or Counter())
    if (
        before.zookeeper
        and after.zookeeper
        and before.zookeeper["epoch"] == after.zookeeper["epoch"]
    ):
        usage.zookeeper_requests = after.zookeeper["received"] - before.zookeeper["received"]
        usage.zookeeper_writes = after.zookeeper["zxid"] - before.zookeeper["zxid"]
    return usage


# -- py-spy -----------------------------------------------------------------------------------


def _py_spy() -> str:
    return str(Path(sys.executable).with_name("py-spy"))


@contextmanager
def profiled(
    cluster: Cluster, directory: Path | None, name: str, rate: int = 100
) -> Iterator[None]:
    """py-spy sampling every running broker while the block runs (nothing without a
    directory), each broker's collapsed stacks (`--format raw`: one line per distinct stack,
    `frame;frame;... count`) written to `<directory>/<name>-broker<id>.txt`. Idle threads are
    left out, so the samples are where CPU went (and the GIL was waited for)."""
    procs = {}
    for broker_id in cluster.ids:
        proc = cluster.broker(broker_id).proc
        if proc is not None and proc.poll() is None:
            procs[f"{name}-broker{broker_id}"] = proc.pid
    with profiled_pids(procs, directory, rate):
        yield


@contextmanager
def profiled_pids(pids: dict[str, int], directory: Path | None, rate: int = 100) -> Iterator[None]:
    """py-spy sampling each process of `pids` (file name -> pid) while the block runs, its
    collapsed stacks written to `<directory>/<file name>.txt` (nothing without a directory)."""
    if directory is None:
        yield
        return
    directory.mkdir(parents=True, exist_ok=True)
    spies, logs = [], []
    for file_name, pid in pids.items():
        out = directory / f"{file_name}.txt"
        spies.append(
            subprocess.Popen(
                [_py_spy(), "record", "--pid", str(pid), "--rate", str(rate),
                 "--format", "raw", "--nonblocking", "-o", str(out)],
                stdout=open(out.with_suffix(".log"), "wb"), stderr=subprocess.STDOUT,
                # Ctrl-C is how py-spy is told to write its file: never inherit it ignored.
                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
            )
        )  # fmt: skip
        logs.append(out.with_suffix(".log"))
    # A Ctrl-C before py-spy samples (it says so in its first line) would be lost.
    for spy, log in zip(spies, logs, strict=True):
        wait_until(
            lambda s=spy, f=log: s.poll() is not None or b"Sampling" in f.read_bytes(),
            time.monotonic() + 30,
            f"py-spy did not start: {log}",
            0.02,
        )
    try:
        yield
    finally:
        for spy in spies:
            spy.send_signal(signal.SIGINT)
        for spy in spies:
            try:
                spy.wait(30)
            except subprocess.TimeoutExpired:
                spy.kill()
                spy.wait()
            spy.stdout and spy.stdout.close()


def wait_until(check: Callable[[], object], deadline: float, what: str, every_s: float = 0.05):
    """`check()`'s first true result; TimeoutError once `deadline` (monotonic) passes."""
    while not (result := check()):
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        time.sleep(every_s)
    return result
