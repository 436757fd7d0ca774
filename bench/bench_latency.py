"""End-to-end latency at fixed rates, in the OpenMessaging-benchmark style (issue 23), and
replication throughput: three brokers and ZooKeeper as processes
(`broker.processes.Cluster`), two topics of 6 partitions on the same cluster: replication
factor 3 (min.insync.replicas 2) written with acks=all, and factor 1 written with acks=1,
the baseline of the same run. librdkafka's mock cluster (one broker, in this process,
`test.mock.num.brokers`) runs the same probe as the outside reference.

latency: a producer sends 100 B records at a fixed rate (spread over the partitions,
linger 0 and 5 ms, no idempotence unless --idempotence), each carrying its send time; a
consumer in the same process (so the same clock) takes the receipt time. Reported from
send to receipt: p50, p99, p99.9 and max over the run after a warm-up, and p99 per 10 s
window (by send time): a queue that grows shows as a p99 that climbs from window to
window. The consumer of the mock cluster polls every 5 ms (the mock answers a fetch at its
max wait, not on an append). The rates are offered, not adapted: a broker that cannot keep
up shows it as latency (and the rate actually sent is printed); records received twice are
librdkafka's retries of requests that timed out (request.timeout.ms) while queued at the
broker.

throughput: unbatched (linger 0) and batched (linger 5 ms) 100 B records as fast as one
producer sends them, to the last acknowledgement, acks=all RF=3 against acks=1 RF=1.

    .venv/bin/python -m bench.bench_latency [--only latency,throughput]
        [--rates 200,1000,2000,5000,10000] [--lingers 0,5] [--seconds 60] [--quick]
        [--targets cluster,mock] [--messages 200000] [--profile DIR] [--idempotence]
    .venv/bin/python -m bench.bench_latency --only requests [--requests 20000]
        [--depths 1,8] [--compare DIR] [--profile DIR]

requests: the broker's own CPU per request, which wall-clock latency on a shared machine
hides: one broker process, a raw socket sending unbatched requests (a Produce of one 100 B
record, acks=1; a Fetch of one record: max.wait 0, max bytes 1, so the first batch only),
`depth` of them in flight, each written on its own; CPU-seconds of the broker process (/proc) over the requests. With
--compare DIR a second broker runs from another checkout (the baseline of a change, same
client), the two served in turn, blocks of 500 requests each.

Results: docs/benchmarks.md, "Cluster: partitions, latency and replication at scale".
"""

from __future__ import annotations

import argparse
import re
import struct
import threading
import time
import urllib.request
import uuid
from contextlib import ExitStack, contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from bench.bench_cluster import percentile
from bench.common import running_cluster
from bench.probes import (
    cpu_times,
    metrics_overrides,
    profiled,
    profiled_pids,
    snapshot,
    usage_between,
    wait_until,
)
from broker.processes import LOCALHOST, BrokerProcess, Cluster, Host
from broker.protocol.apis import CREATE_TOPICS, FETCH, PRODUCE
from broker.protocol.framing import decode_response, encode_request
from broker.records.batch import build_batch

PARTITIONS = 6
VALUE_BYTES = 100
WINDOW_S = 10.0
_STAMP = struct.Struct(">d")
_PAD = b"x" * (VALUE_BYTES - _STAMP.size)
# librdkafka leaves Nagle's algorithm on by default (the Java client turns it off): a
# small request behind an unacknowledged one then waits for the peer's delayed ACK, tens
# of milliseconds that belong to the client's socket, not to the broker. --nagle keeps it.
NO_NAGLE = True
# --idempotence: the acks=all producers with enable.idempotence=true, which caps librdkafka's
# in-flight requests per broker at 5 (its batches grow instead); acks=1 cannot be idempotent.
IDEMPOTENCE = False


@dataclass(frozen=True)
class Target:
    """Where a probe writes: a name for the report, the bootstrap, the topic and the
    producer's acks."""

    name: str
    bootstrap: str
    topic: str
    acks: str
    # Our broker answers a waiting fetch on the append; the mock only at fetch.wait.max.ms
    # (tests/helpers/mock_cluster.py), so its consumer polls every 5 ms.
    fetch_wait_ms: int = 100


@dataclass
class Probe:
    rate: int
    linger_ms: int
    target: Target
    sent: int = 0
    seconds: float = 0.0
    samples: list[tuple[float, float]] = field(default_factory=list)  # (sent at, latency ms)
    total_sent: int = 0  # warm-up included
    failed: int = 0

    def row(self) -> str:
        ms = sorted(latency for _, latency in self.samples)
        windows = {}
        for sent_at, latency in self.samples:
            windows.setdefault(int(sent_at // WINDOW_S), []).append(latency)
        p99s = " / ".join(f"{percentile(v, 0.99):.0f}" for _, v in sorted(windows.items()))
        distinct = len({sent_at for sent_at, _ in self.samples})
        lost, duplicated = self.sent - distinct, len(self.samples) - distinct
        return (
            f"| {self.rate:,} | {self.linger_ms} | {self.target.name} | "
            f"{self.sent / self.seconds:,.0f} | {percentile(ms, 0.5):.1f} | "
            f"{percentile(ms, 0.99):.1f} | {percentile(ms, 0.999):.1f} | "
            f"{max(ms, default=float('nan')):.0f} | {p99s} | {lost:,} | {duplicated:,} |"
        )


def _consumer(bootstrap: str, topic: str, partitions: int, wait_ms: int) -> Consumer:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"latency-{uuid.uuid4().hex[:6]}",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": wait_ms,
            "socket.nagle.disable": NO_NAGLE,
            "log_level": 4,
        }
    )
    ends = []
    for p in range(partitions):
        _, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)
        ends.append(TopicPartition(topic, p, high))
    consumer.assign(ends)
    return consumer


def run_probe(probe: Probe, seconds: float, warmup_s: float) -> Probe:
    """Send at `probe.rate` for `warmup_s + seconds`; keep the receipts of what was sent after
    the warm-up."""
    t = probe.target
    md = AdminClient({"bootstrap.servers": t.bootstrap}).list_topics(t.topic, timeout=30)
    partitions = len(md.topics[t.topic].partitions)
    consumer = _consumer(t.bootstrap, t.topic, partitions, t.fetch_wait_ms)
    producer = Producer(
        {
            "bootstrap.servers": t.bootstrap,
            "acks": t.acks,
            "linger.ms": probe.linger_ms,
            "enable.idempotence": IDEMPOTENCE and t.acks == "all",
            "queue.buffering.max.messages": 2_000_000,
            "socket.nagle.disable": NO_NAGLE,
            "log_level": 4,
        }
    )
    producer.list_topics(t.topic, timeout=30)
    start = time.monotonic()
    measured_from = start + warmup_s
    end = measured_from + seconds
    stop = threading.Event()
    received: list[tuple[float, float]] = []

    def consume() -> None:
        # poll, one message at a time: consume(n) would wait for n messages (or its timeout)
        # and stamp the first of them late.
        while not stop.is_set():
            msg = consumer.poll(0.05)
            now = time.monotonic()
            if msg is not None and msg.error() is None:
                (sent_at,) = _STAMP.unpack_from(msg.value())
                if sent_at >= measured_from:
                    received.append((sent_at - measured_from, (now - sent_at) * 1000))

    def delivered(err, _msg) -> None:
        if err is not None:
            probe.failed += 1

    reader = threading.Thread(target=consume, daemon=True)
    reader.start()
    # A rate limiter as the OpenMessaging benchmark's: whatever is due by now is sent, then
    # a short sleep; each record stamped when it is handed to the client.
    sent = 0
    while (now := time.monotonic()) < end:
        due = int((now - start) * probe.rate)
        while sent < due:
            stamp = time.monotonic()
            producer.produce(
                t.topic, _STAMP.pack(stamp) + _PAD, partition=sent % partitions,
                on_delivery=delivered,
            )  # fmt: skip
            sent += 1
            if stamp >= measured_from:
                probe.sent += 1
        producer.poll(0)
        time.sleep(0.0005)
    producer.flush(120)
    probe.total_sent = sent
    # The last records sent get the time to arrive that the others had.
    try:
        wait_until(lambda: len(received) >= probe.sent, time.monotonic() + 30, "late", 0.1)
    except TimeoutError:
        pass  # counted as not received
    stop.set()
    reader.join()
    consumer.close()
    probe.seconds = seconds
    probe.samples = received
    return probe


_PHASE = re.compile(
    r'^kafka_request_duration_seconds_(sum|count)\{api="(produce|fetch)",phase="([a-z]+)"\} '
    r"([0-9.e+-]+)$",
    re.M,
)


def _phases(cluster: Cluster) -> dict[tuple[str, str, str], float]:
    """Produce's and Fetch's latency phases (queue, handler, purgatory, send), summed over
    the brokers: (sum|count, api, phase) -> value, from each broker's /metrics."""
    found: dict[tuple[str, str, str], float] = {}
    for broker_id in cluster.ids:
        port = cluster.broker(broker_id).overrides.get("metrics.port")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as f:
                text = f.read().decode()
        except OSError:
            continue
        for kind, api, phase, value in _PHASE.findall(text):
            found[(kind, api, phase)] = found.get((kind, api, phase), 0.0) + float(value)
    return found


def _phase_means(before: dict, after: dict) -> str:
    """Mean ms per phase over a probe: where a request's time went inside the brokers (the
    send phase of a fetch: from its answer ready to its bytes written)."""
    out = []
    for api in ("produce", "fetch"):
        parts = []
        for phase in ("queue", "handler", "purgatory", "send"):
            n = after.get(("count", api, phase), 0) - before.get(("count", api, phase), 0)
            total = after.get(("sum", api, phase), 0) - before.get(("sum", api, phase), 0)
            if n:
                parts.append(f"{phase} {total / n * 1000:.2f}")
        out.append(f"{api} ms: " + ", ".join(parts))
    return "  (mean per request, " + "; ".join(out) + ")"


def _cost(usage, records: int) -> str:
    """The brokers' CPU and requests over a probe (warm-up and drain included): the figures
    a loaded machine leaves comparable, unlike wall-clock latency. Per record as well as
    per Produce: a producer that falls behind batches, and its requests grow."""
    total = usage.requests_total()
    produces, fetches = total["produce"], total["fetch"]
    cpu = sum(usage.cpu.values())
    per = f"{cpu / produces * 1e6:,.0f} us CPU per Produce" if produces else "no Produce"
    per += f", {cpu / records * 1e6:,.0f} us per record" if records else ""
    fetch = f", {fetches / produces:.2f} Fetch per Produce" if produces else ""
    return f"  ({usage.summary(('produce', 'fetch', 'metadata'))}; {per}{fetch})"


# -- the targets ------------------------------------------------------------------------------


def create(bootstrap: str, topic: str, factor: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    config = {"min.insync.replicas": "2"} if factor > 1 else {}
    admin.create_topics([NewTopic(topic, PARTITIONS, factor, config=config)])[topic].result(60)

    def in_sync() -> bool:
        meta = admin.list_topics(topic, timeout=10).topics[topic]
        return meta.error is None and all(
            p.leader >= 0 and len(p.isrs) == factor for p in meta.partitions.values()
        )

    wait_until(in_sync, time.monotonic() + 60, f"{topic} not in sync", 0.1)


def cluster_targets(cluster: Cluster) -> list[Target]:
    rf1, rf3 = f"lat-rf1-{uuid.uuid4().hex[:6]}", f"lat-rf3-{uuid.uuid4().hex[:6]}"
    create(cluster.bootstrap, rf1, 1)
    create(cluster.bootstrap, rf3, 3)
    return [
        Target("acks=1 RF=1", cluster.bootstrap, rf1, "1"),
        Target("acks=all RF=3", cluster.bootstrap, rf3, "all"),
    ]


@contextmanager
def mock_cluster():
    """librdkafka's mock cluster, one broker, alive as long as the client that started it;
    its topics are created on first use (Metadata auto-creation)."""
    owner = Producer({"test.mock.num.brokers": 1, "bootstrap.servers": "", "log_level": 4})
    broker = next(iter(owner.list_topics(timeout=10).brokers.values()))
    bootstrap = f"{broker.host}:{broker.port}"
    topic = f"lat-mock-{uuid.uuid4().hex[:6]}"
    owner.produce(topic, b"", partition=0)
    owner.flush(10)
    try:
        yield [Target("mock acks=all", bootstrap, topic, "all", fetch_wait_ms=5)]
    finally:
        owner.flush(10)


# -- throughput -------------------------------------------------------------------------------


def throughput(target: Target, linger_ms: int, messages: int) -> float:
    producer = Producer(
        {
            "bootstrap.servers": target.bootstrap,
            "acks": target.acks,
            "linger.ms": linger_ms,
            "enable.idempotence": IDEMPOTENCE and target.acks == "all",
            "batch.num.messages": 10000,
            "queue.buffering.max.messages": 1_000_000,
            "log_level": 4,
        }
    )
    producer.list_topics(target.topic, timeout=30)
    value = b"x" * VALUE_BYTES
    start = time.perf_counter()
    for i in range(messages):
        while True:
            try:
                producer.produce(target.topic, value, partition=i % PARTITIONS)
                break
            except BufferError:
                producer.poll(0.001)
    if producer.flush(300):
        raise RuntimeError(f"{target.name}: writes not acknowledged")
    return messages / (time.perf_counter() - start)


def measure_throughput(cluster: Cluster, targets: list[Target], messages: int, runs: int):
    print(f"\n== throughput: {messages:,} x {VALUE_BYTES} B over {PARTITIONS} partitions ==")
    print("| linger ms | run | acks=1 RF=1 msg/s | acks=all RF=3 msg/s | ratio | CPU s b0/b1/b2 |")
    for linger in (0, 5):
        ratios = []
        for run in range(runs):
            rates = {}
            cpu = {}
            for target in targets if run % 2 == 0 else targets[::-1]:
                before = snapshot(cluster, count_requests=False)
                rates[target.acks] = throughput(target, linger, messages)
                used = usage_between(before, snapshot(cluster, count_requests=False)).cpu
                cpu[target.acks] = "/".join(f"{s:.1f}" for _, s in sorted(used.items()))
            ratios.append(rates["all"] / rates["1"])
            print(
                f"| {linger} | {run} | {rates['1']:,.0f} | {rates['all']:,.0f} | "
                f"{ratios[-1]:.2f} | acks=1 {cpu['1']}; acks=all {cpu['all']} |",
                flush=True,
            )
        kind = "unbatched" if linger == 0 else "batched"
        print(
            f"{kind} (linger {linger} ms) acks=all RF=3 / acks=1 RF=1: "
            f"{min(ratios):.2f}-{max(ratios):.2f} (target >= 0.5)",
            flush=True,
        )


# -- CPU per request ---------------------------------------------------------------------------


class _RawClient:
    """A blocking socket speaking frames: requests written one by one, answers read back."""

    def __init__(self, address: str) -> None:
        import socket

        host, port = address.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._buf = bytearray()
        self._correlation = 0

    def send(self, api_key: int, version: int, body: dict) -> None:
        self._correlation += 1
        self.sock.sendall(encode_request(api_key, version, self._correlation, "bench", body))

    def receive(self) -> bytes:
        while True:
            if len(self._buf) >= 4:
                size = int.from_bytes(self._buf[:4], "big")
                if len(self._buf) >= 4 + size:
                    frame = bytes(self._buf[4 : 4 + size])
                    del self._buf[: 4 + size]
                    return frame
            data = self.sock.recv(1 << 20)
            if not data:
                raise ConnectionError("broker closed the connection")
            self._buf += data

    def call(self, api_key: int, version: int, body: dict) -> dict:
        self.send(api_key, version, body)
        return decode_response(api_key, version, self.receive())[1]

    def close(self) -> None:
        self.sock.close()


def _produce_body(topic: str) -> dict:
    records = build_batch([(None, b"x" * VALUE_BYTES, None, [])])
    return {
        "transactional_id": None, "acks": 1, "timeout_ms": 30000,
        "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": records}]}],
    }  # fmt: skip


def _fetch_body(topic: str, offset: int) -> dict:
    return {
        "replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1,
        "isolation_level": 0, "session_id": 0, "session_epoch": -1,
        "topics": [{"topic": topic, "partitions": [{
            "partition": 0, "current_leader_epoch": -1, "fetch_offset": offset,
            "log_start_offset": -1, "partition_max_bytes": 1,
        }]}],
        "forgotten_topics_data": [], "rack_id": "",
    }  # fmt: skip


def _requests_cpu(
    pid: int, client: _RawClient, count: int, depth: int, next_body
) -> tuple[float, float]:
    """Broker CPU-seconds (user, system) for `count` requests, `depth` in flight."""
    before = cpu_times(pid)
    sent = 0
    for _ in range(min(depth, count)):
        client.send(*next_body(sent))
        sent += 1
    for _ in range(count):
        client.receive()
        if sent < count:
            client.send(*next_body(sent))
            sent += 1
    time.sleep(0.05)  # the broker's work after its last answer (metrics, timers)
    after = cpu_times(pid)
    return after[0] - before[0], after[1] - before[1]


BLOCK = 500  # requests per broker in turn (--compare): both see the same load of others


def measure_requests(count: int, depths: list[int], roots: list[Path | None], profile):
    """Each root's broker (None: this checkout) served `count` requests of each kind and
    depth, in blocks taken in turn, so a change in the machine's load falls on all alike."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="bench-requests-") as work, ExitStack() as stack:
        runs = []
        for n, root in enumerate(roots):
            host = LOCALHOST if root is None else Host(command_prefix=("env", "-C", str(root)))
            broker = BrokerProcess(Path(work) / f"logs{n}", {"log.flush.interval.messages": "1000000"},
                                   host=host)  # fmt: skip
            stack.enter_context(broker)
            client = _RawClient(broker.bootstrap)
            stack.callback(client.close)
            client.call(CREATE_TOPICS, 4, {
                "topics": [{"name": "requests", "num_partitions": 1, "replication_factor": 1,
                            "assignments": [], "configs": []}],
                "timeout_ms": 10000, "validate_only": False,
            })  # fmt: skip
            runs.append((str(root or "this checkout"), broker.proc.pid, client))
        produce = _produce_body("requests")
        kinds = (
            ("Produce v8 acks=1, 1 record", lambda i: (PRODUCE, 8, produce)),
            ("Fetch v11, 1 record", lambda i: (FETCH, 11, _fetch_body("requests", i))),
        )
        for _, pid, client in runs:  # warm up: imports, caches, the first segment
            for _, body in kinds:
                _requests_cpu(pid, client, 2000, 8, body)
        print(f"\n== broker CPU per request, {count:,} each, in blocks of {BLOCK} in turn ==")
        print("| broker | API | depth | CPU s (user + system) | us per request (user + system) |")
        for depth in depths:
            for api, body in kinds:
                used = {name: [0.0, 0.0] for name, _, _ in runs}
                name = f"requests-{api.split()[0].lower()}-depth{depth}"
                spied = {f"{name}-{n}": pid for n, (_, pid, _) in enumerate(runs)}
                with profiled_pids(spied, profile):
                    for _ in range(0, count, BLOCK):
                        for run, pid, client in runs:
                            user, system = _requests_cpu(pid, client, BLOCK, depth, body)
                            used[run][0] += user
                            used[run][1] += system
                us = 1e6 / count
                for run, (user, system) in used.items():
                    print(
                        f"| {run} | {api} | {depth} | {user + system:.2f} ({user:.2f} + "
                        f"{system:.2f}) | {(user + system) * us:,.0f} ({user * us:,.0f} + "
                        f"{system * us:,.0f}) |",
                        flush=True,
                    )


# -- main -------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default="latency,throughput")
    parser.add_argument("--rates", default="200,1000,2000,5000,10000")
    parser.add_argument("--lingers", default="0,5")
    parser.add_argument("--targets", default="cluster,mock")
    parser.add_argument("--seconds", type=float, default=60.0, help="per point, after warm-up")
    parser.add_argument("--warmup-s", type=float, default=5.0)
    parser.add_argument("--quick", action="store_true", help="20 s per point, 2 s warm-up")
    parser.add_argument("--messages", type=int, default=200_000, help="per throughput run")
    parser.add_argument("--runs", type=int, default=2, help="throughput runs, alternating")
    parser.add_argument("--requests", type=int, default=20_000, help="per API and depth")
    parser.add_argument("--depths", default="1,8", help="requests in flight (--only requests)")
    parser.add_argument(
        "--compare", type=Path, help="--only requests: also a broker from this checkout, in turn"
    )
    parser.add_argument(
        "--profile", type=Path, help="py-spy the brokers during each cluster latency point"
    )
    parser.add_argument("--work", type=Path, help="keep the cluster's files and logs here")
    parser.add_argument("--nagle", action="store_true", help="librdkafka's default: Nagle on")
    parser.add_argument(
        "--idempotence", action="store_true", help="acks=all producers idempotent (5 in flight)"
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a broker config for every broker (e.g. queued.max.requests.per.connection=1)",
    )
    args = parser.parse_args()
    global NO_NAGLE, IDEMPOTENCE
    NO_NAGLE = not args.nagle
    IDEMPOTENCE = args.idempotence
    if args.quick:
        args.seconds, args.warmup_s = 20.0, 2.0
        args.messages = min(args.messages, 50_000)
    only = set(args.only.split(","))
    if "requests" in only:
        depths = [int(d) for d in args.depths.split(",")]
        roots = [args.compare, None] if args.compare else [None]
        measure_requests(args.requests, depths, roots, args.profile)
        only.discard("requests")
        if not only:
            return
    rates = [int(r) for r in args.rates.split(",")]
    lingers = [int(v) for v in args.lingers.split(",")]
    wanted = set(args.targets.split(","))
    with ExitStack() as stack:
        overrides = dict(item.split("=", 1) for item in args.set)
        cluster = stack.enter_context(
            running_cluster(
                3, args.work, broker_overrides=metrics_overrides([0, 1, 2]), **overrides
            )
        )
        targets = cluster_targets(cluster)
        if "latency" in only:
            if "mock" in wanted:
                targets_mock = stack.enter_context(mock_cluster())
            else:
                targets_mock = []
            print(
                f"\n== end-to-end latency, {VALUE_BYTES} B, {PARTITIONS} partitions, "
                f"{args.seconds:.0f} s per point after {args.warmup_s:.0f} s warm-up; "
                f"p99 per {WINDOW_S:.0f} s window (ms) ==",
                flush=True,
            )
            print(
                "| rate msg/s | linger ms | target | sent msg/s | p50 ms | p99 ms | p99.9 ms | "
                "max ms | p99 per window | not received | received twice |"
            )
            for rate in rates:
                for linger in lingers:
                    probes = []
                    points = (targets if "cluster" in wanted else []) + targets_mock
                    for target in points:
                        on_cluster = target.bootstrap == cluster.bootstrap
                        name = f"latency-{rate}-{linger}ms-{target.acks}"
                        spy = profiled(cluster, args.profile, name) if on_cluster else nullcontext()
                        before = snapshot(cluster) if on_cluster else None
                        phases = _phases(cluster) if on_cluster else None
                        with spy:
                            probe = run_probe(
                                Probe(rate, linger, target), args.seconds, args.warmup_s
                            )
                        probes.append(probe)
                        print(probe.row(), flush=True)
                        if before is not None:
                            used = usage_between(before, snapshot(cluster))
                            print(_cost(used, probe.total_sent), flush=True)
                            print(_phase_means(phases, _phases(cluster)), flush=True)
                    by = {p.target.name: p for p in probes}
                    if "acks=all RF=3" in by and "acks=1 RF=1" in by:
                        a, b = by["acks=all RF=3"], by["acks=1 RF=1"]
                        p99a = percentile([x for _, x in a.samples], 0.99)
                        p99b = percentile([x for _, x in b.samples], 0.99)
                        print(
                            f"rate {rate:,} linger {linger}: p99 acks=all RF=3 / acks=1 RF=1 = "
                            f"{p99a / p99b:.2f} (target <= 2)",
                            flush=True,
                        )
        if "throughput" in only and "cluster" in wanted:
            measure_throughput(cluster, targets, args.messages, args.runs)


if __name__ == "__main__":
    main()
