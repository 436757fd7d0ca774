"""Cluster mode under load and under failure: ZooKeeper and three brokers, each its own
process (`broker.processes.Cluster`), driven by confluent-kafka (librdkafka). Each measure
prints a ratio taken in the same run:

- throughput: acks=all to a partition with replication factor 3 (min.insync.replicas=2)
  against acks=1 to one with replication factor 1, on the same cluster, alternating (target
  >= 0.5); the consume rate of each;
- kill: an idempotent acks=all producer writes to one partition at a steady rate and its
  leader is killed (SIGKILL). The unavailability runs from the kill to the first write
  acknowledged by the new leader (a write of a later leader epoch, read back from the log),
  against zookeeper.session.timeout.ms + 1 s (target <= 1). Every acknowledged write is
  then read back: each must be in the log exactly once. `--soak N`: N kills in a row, each
  killed broker restarted and back in the ISR before the next kill;
- shutdown: the same with SIGTERM (a controlled shutdown), against 1 s; no error may reach
  the application (the produce errors librdkafka retried by itself are counted from its
  debug log);
- lag: the followers' log ends against the leader's under a steady load (acks=all unless
  --lag-acks), read from the replicas' segment files (the topic stamps LogAppendTime, so
  each batch carries the leader's append time), in messages and in milliseconds; against
  replica.lag.time.max.ms (a follower lagging that long would leave the ISR).

    .venv/bin/python -m bench.bench_cluster [--only throughput,kill,shutdown,lag]
        [--messages 2000000] [--runs 3] [--soak 3] [--shutdowns 3] [--rate 1000]
        [--lag-rate 5000] [--lag-seconds 30] [--lag-acks all]
        [--session-timeout-ms 6000] [--zookeeper-tick-ms 2000]
        [--producer-conf KEY=VALUE ...] [--work DIR]

Results and what limits them: docs/benchmarks.md, "Cluster".
"""

from __future__ import annotations

import argparse
import re
import threading
import time
import uuid
from bisect import bisect_left, bisect_right
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from bench.bench_clients import consume, produce
from bench.common import running_cluster
from broker.cluster import LeaderAndIsr
from broker.processes import Cluster, kazoo_session
from broker.records.batch import iter_batches
from broker.util.clock import SECOND_MS, now_ms
from broker.zk.layout import (
    BROKER_IDS,
    decode_partition_state,
    partition_state_path,
)

MEASURES = ("throughput", "kill", "shutdown", "lag")


def fresh(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def wait_for(check: Callable, timeout_s: float, what: str):
    deadline = time.monotonic() + timeout_s
    while not (result := check()):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not within {timeout_s:.0f} s")
        time.sleep(0.02)
    return result


# -- the partition's state in ZooKeeper -----------------------------------------------------


class ZkWatch:
    """What ZooKeeper says while a measure runs, each change with the time it was seen
    (kazoo watches): partition 0 of `topic`'s state (the controller's leader, leader
    epoch and ISR) and the registered brokers (a killed broker's goes when its session
    expires)."""

    def __init__(self, cluster: Cluster, topic: str) -> None:
        self._session = kazoo_session(cluster.zookeeper_connect)
        self._path = partition_state_path(topic, 0)
        self.changes: list[tuple[float, LeaderAndIsr]] = []
        self.registered: list[tuple[float, set[int]]] = []
        self._changed = threading.Condition()

    def __enter__(self) -> ZkWatch:
        client = self._session.__enter__()
        client.DataWatch(self._path, self._state)
        client.ChildrenWatch(BROKER_IDS, self._brokers)
        return self

    def __exit__(self, *exc) -> None:
        self._session.__exit__(*exc)

    def _state(self, data, stat) -> None:
        if data is None:
            return
        with self._changed:
            self.changes.append((time.monotonic(), decode_partition_state(data, stat.version)))
            self._changed.notify_all()

    def _brokers(self, children) -> None:
        with self._changed:
            ids = {int(c) for c in children if c.isdigit()}
            self.registered.append((time.monotonic(), ids))

    def wait(
        self, check: Callable[[LeaderAndIsr], bool], since: float = 0.0, timeout_s: float = 60.0
    ) -> tuple[float, LeaderAndIsr]:
        """The first state, among the one current at `since` and those after, for which
        `check` holds, and when it was seen; waits for it up to `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        with self._changed:
            while True:
                first = max(0, bisect_right([t for t, _ in self.changes], since) - 1)
                for seen, state in self.changes[first:]:
                    if check(state):
                        return seen, state
                left = deadline - time.monotonic()
                if left <= 0:
                    last = self.changes[-1][1] if self.changes else None
                    raise TimeoutError(f"{self._path}: still {last} after {timeout_s:.0f} s")
                self._changed.wait(left)

    def current(self) -> LeaderAndIsr:
        """The latest state seen (waiting for the first)."""
        self.wait(lambda s: True)
        return self.changes[-1][1]

    def unregistered(self, broker_id: int, since: float) -> float | None:
        """When `broker_id`'s registration was first seen gone after `since`."""
        with self._changed:
            return next(
                (t for t, ids in self.registered if t >= since and broker_id not in ids), None
            )


def create_topic(cluster: Cluster, topic: str, factor: int, config: dict[str, str]) -> None:
    """One partition, returned once it has a leader and every replica is in sync."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(topic, 1, factor, config=config)])[topic].result(30)
    wait_for(lambda: _in_sync(admin, topic), 30, f"{topic} in sync")


def _in_sync(admin: AdminClient, topic: str) -> bool:
    md = admin.list_topics(topic, timeout=10).topics[topic]
    return md.error is None and all(
        p.leader >= 0 and len(p.isrs) == len(p.replicas) for p in md.partitions.values()
    )


# -- a steady producer ------------------------------------------------------------------------

_PRODUCE_ERROR = re.compile(r"encountered error: (.*) \(actions ([^)]*)\)")


class _RetriedErrors:
    """A librdkafka logger (debug context `msg`): counts the produce errors it handled itself
    (`MessageSet with N message(s) ... encountered error: <error> (actions <actions>)`)."""

    def __init__(self) -> None:
        self.errors: Counter[str] = Counter()

    def log(self, level: int, fmt: str, *args) -> None:
        found = _PRODUCE_ERROR.search(fmt % args if args else fmt)
        if found:
            self.errors[found.group(1)] += 1


class PacedProducer:
    """A producer writing numbered values (b"%010d") to partition 0 of `topic` at `rate`
    messages a second, in a thread: idempotent, acks=all, linger 2 ms, unless `conf` says
    otherwise. Keeps when each acknowledged write was sent and acknowledged and at what
    offset, every error the application saw (failed delivery reports, the error callback)
    and the errors librdkafka retried by itself."""

    def __init__(self, bootstrap: str, topic: str, rate: int, conf: dict | None = None) -> None:
        self.topic, self.rate = topic, rate
        self.sent_at: list[float] = []  # by sequence number
        self.acked: list[tuple[float, int, int]] = []  # (time, offset, sequence number)
        self.failed: list[tuple[float, KafkaError]] = []
        self.client_errors: Counter[str] = Counter()
        self.retried = _RetriedErrors()
        self.producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 2,
                "message.timeout.ms": 120000,
                "debug": "msg",
                "logger": self.retried,
                "error_cb": lambda err: self.client_errors.update([err.name()]),
                **(conf or {}),
            }
        )
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _delivered(self, err, msg) -> None:
        if err is not None:
            self.failed.append((time.monotonic(), err))
        else:
            self.acked.append((time.monotonic(), msg.offset(), int(msg.value())))

    def _run(self) -> None:
        interval = 1.0 / self.rate
        due = time.monotonic()
        while not self._stop.is_set():
            now = time.monotonic()
            if now < due:
                self.producer.poll(due - now)
                continue
            try:
                self.producer.produce(
                    self.topic, b"%010d" % len(self.sent_at), partition=0,
                    on_delivery=self._delivered,
                )  # fmt: skip
            except BufferError:
                self.producer.poll(0.01)
                continue
            self.sent_at.append(now)
            # A steady rate: after a stall (a full queue) go on from now, no burst.
            due = max(due + interval, now - 0.05)
            self.producer.poll(0)

    def __enter__(self) -> PacedProducer:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.unflushed = self.producer.flush(120)

    def acked_since(self, since: float) -> int:
        return len(self.acked) - bisect_left(self.acked, since, key=lambda ack: ack[0])

    def wait_acked_since(self, since: float, count: int, timeout_s: float = 120.0) -> None:
        wait_for(
            lambda: self.acked_since(since) >= count, timeout_s, f"{count} writes acknowledged"
        )

    def latencies_ms(self, since: float = 0.0) -> list[float]:
        """From send to acknowledgement, of the writes sent from `since` on."""
        return [
            (t - self.sent_at[seq]) * SECOND_MS
            for t, _, seq in self.acked
            if self.sent_at[seq] >= since
        ]


def read_back(bootstrap: str, topic: str) -> list[tuple[int, int, int]]:
    """(offset, leader epoch, sequence number) of every record of partition 0, from the log
    start to the high watermark."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "bench-read-back", "enable.auto.commit": False}
    )
    low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)
    consumer.assign([TopicPartition(topic, 0, low)])
    records, position = [], low
    while position < high:
        for msg in consumer.consume(min(10000, high - position), timeout=10):
            if msg.error():
                raise RuntimeError(msg.error())
            records.append((msg.offset(), msg.leader_epoch(), int(msg.value())))
            position = msg.offset() + 1
    consumer.close()
    return records


@dataclass
class ExactlyOnce:
    acknowledged: int
    in_log: int
    duplicates: int  # records whose value is already earlier in the log
    missing: int  # acknowledged, not in the log
    out_of_order: int  # a value below the one before it

    @property
    def ok(self) -> bool:
        return not (self.duplicates or self.missing or self.out_of_order)

    def __str__(self) -> str:
        verdict = "exactly once" if self.ok else "NOT exactly once"
        return (
            f"{self.acknowledged:,} acknowledged, {self.in_log:,} in the log, "
            f"{self.duplicates} duplicated, {self.missing} missing, "
            f"{self.out_of_order} out of order: {verdict}"
        )


def check_exactly_once(traffic: PacedProducer, log: list[tuple[int, int, int]]) -> ExactlyOnce:
    values = [seq for _, _, seq in log]
    in_log = set(values)
    acked = {seq for _, _, seq in traffic.acked}
    return ExactlyOnce(
        acknowledged=len(acked),
        in_log=len(values),
        duplicates=len(values) - len(in_log),
        missing=len(acked - in_log),
        out_of_order=sum(1 for a, b in zip(values, values[1:], strict=False) if b < a),
    )


# -- throughput -----------------------------------------------------------------------------


def measure_throughput(cluster: Cluster, n: int, runs: int) -> None:
    print(f"\n== throughput: {n:,} x 100 B, linger 5 ms, {runs} runs alternating ==", flush=True)
    results: dict[str, list[tuple[float, float]]] = {"rf1": [], "rf3": []}
    for run in range(runs):
        order = ["rf1", "rf3"] if run % 2 == 0 else ["rf3", "rf1"]
        for kind in order:
            topic = fresh(f"throughput-{kind}")
            if kind == "rf1":
                create_topic(cluster, topic, 1, {})
                conf = {"acks": 1}
            else:
                create_topic(cluster, topic, 3, {"min.insync.replicas": "2"})
                conf = {"acks": "all"}
            rate, _, producer = produce({"bootstrap.servers": cluster.bootstrap, **conf}, n, topic)
            del producer
            consumed, _ = consume(cluster.bootstrap, n, topic)
            results[kind].append((rate, consumed))
            print(f"run {run}: {kind} produce {rate:,.0f} msg/s, consume {consumed:,.0f} msg/s")
    ratios = [rf3[0] / rf1[0] for rf1, rf3 in zip(results["rf1"], results["rf3"], strict=True)]
    consume_ratios = [
        rf3[1] / rf1[1] for rf1, rf3 in zip(results["rf1"], results["rf3"], strict=True)
    ]
    print("| run | acks=1 RF=1 msg/s | acks=all RF=3 msg/s | ratio | consume RF=1 | RF=3 |")
    for run, (rf1, rf3) in enumerate(zip(results["rf1"], results["rf3"], strict=True)):
        print(
            f"| {run} | {rf1[0]:,.0f} | {rf3[0]:,.0f} | {ratios[run]:.2f} | "
            f"{rf1[1]:,.0f} | {rf3[1]:,.0f} |"
        )
    print(
        f"produce ratio acks=all RF=3 / acks=1 RF=1: {min(ratios):.2f}-{max(ratios):.2f} "
        f"(target >= 0.5); consume RF=3 / RF=1: {min(consume_ratios):.2f}-"
        f"{max(consume_ratios):.2f}",
        flush=True,
    )


# -- unavailability: kill -9 and controlled shutdown ------------------------------------------


@dataclass
class Outage:
    broker: int
    was_controller: bool
    epoch: int  # the leader epoch it led at
    began: float  # the signal
    expired: float | None  # its registration gone from ZooKeeper (never, on SIGTERM)
    elected: float  # a new leader in ZooKeeper
    new_leader: int
    exited: float  # the process gone (SIGTERM: after its controlled shutdown)
    rejoined: float | None = None  # restarted and back in the ISR
    first_ack: float | None = None  # the first write acknowledged by a later epoch
    longest_gap: float = 0.0  # between two acknowledgements, around the outage


def run_outages(
    cluster: Cluster, count: int, rate: int, graceful: bool, producer_conf: dict[str, str]
) -> tuple[list[Outage], PacedProducer, ExactlyOnce]:
    """`count` times in a row: the leader of an RF=3 partition (min.insync.replicas=2) under
    a PacedProducer killed (or stopped with SIGTERM), a new leader elected and taking
    writes, the broker restarted and back in the ISR. Then the log read back."""
    topic = fresh("shutdown" if graceful else "kill")
    create_topic(cluster, topic, 3, {"min.insync.replicas": "2"})
    outages: list[Outage] = []
    with ZkWatch(cluster, topic) as states:
        states.wait(lambda s: len(s.isr) == 3)
        with PacedProducer(cluster.bootstrap, topic, rate, producer_conf) as traffic:
            traffic.wait_acked_since(0, 2 * rate)  # two seconds of steady traffic first
            for _ in range(count):
                state = states.current()
                leader = state.leader
                was_controller = cluster.controller() == leader
                began = time.monotonic()
                if graceful:
                    code = cluster.broker(leader).stop()
                    if code != 0:
                        print(f"broker {leader} exited with code {code} on SIGTERM")
                else:
                    cluster.kill(leader)
                exited = time.monotonic()
                elected, new = states.wait(lambda s, b=leader: s.leader not in (b, -1), began)
                traffic.wait_acked_since(elected, rate)  # a second of writes on the new leader
                cluster.restart(leader)
                rejoined, _ = states.wait(
                    lambda s, b=leader: b in s.isr and len(s.isr) == 3, time.monotonic()
                )
                outages.append(
                    Outage(
                        broker=leader,
                        was_controller=was_controller,
                        epoch=state.leader_epoch,
                        began=began,
                        expired=None if graceful else states.unregistered(leader, began),
                        elected=elected,
                        new_leader=new.leader,
                        exited=exited,
                        rejoined=rejoined,
                    )
                )
                traffic.wait_acked_since(rejoined, rate)  # steady again before the next one
    log = read_back(cluster.bootstrap, topic)
    epoch_at = {offset: epoch for offset, epoch, _ in log}
    times = [t for t, _, _ in traffic.acked]
    for outage in outages:
        after = [
            t for t, offset, _ in traffic.acked
            if t >= outage.began and epoch_at.get(offset, -1) > outage.epoch
        ]  # fmt: skip
        outage.first_ack = min(after, default=None)
        end = outage.first_ack if outage.first_ack is not None else outage.rejoined
        window = times[max(0, bisect_right(times, outage.began) - 1) : bisect_right(times, end)]
        outage.longest_gap = max(
            (b - a for a, b in zip(window, window[1:], strict=False)), default=0.0
        )
    return outages, traffic, check_exactly_once(traffic, log)


def report_outages(
    title: str, outages: list[Outage], traffic: PacedProducer, check: ExactlyOnce, budget_s: float
) -> None:
    """One row per outage, seconds from the signal; the ratio is the unavailability (to the
    first write acknowledged by the new leader) over the budget."""
    print(f"\n== {title} ==")
    print(
        "| # | leader (controller?) -> new | exited | registration gone | new leader in ZK | "
        "first write on new leader | longest ack gap | ratio | back in ISR |"
    )

    def since(t: float | None, o: Outage) -> str:
        return "-" if t is None else f"{t - o.began:.2f}"

    unavailable = []
    for i, o in enumerate(outages):
        unavailable.append(o.first_ack - o.began if o.first_ack is not None else float("inf"))
        print(
            f"| {i} | {o.broker} ({'yes' if o.was_controller else 'no'}) -> {o.new_leader} | "
            f"{since(o.exited, o)} | {since(o.expired, o)} | {since(o.elected, o)} | "
            f"{since(o.first_ack, o)} | {o.longest_gap:.2f} | {unavailable[-1] / budget_s:.2f} | "
            f"{since(o.rejoined, o)} |"
        )
    worst = max(unavailable)
    print(
        f"unavailability {min(unavailable):.2f}-{worst:.2f} s (median "
        f"{percentile(unavailable, 0.5):.2f}); worst / {budget_s:.1f} s: {worst / budget_s:.2f} "
        "(target <= 1)"
    )
    print(f"read back: {check}")
    failed = Counter(err.name() for _, err in traffic.failed)
    print(
        f"application saw: {len(traffic.failed)} failed deliveries {dict(failed)}, "
        f"{traffic.unflushed} unflushed; error callback {dict(traffic.client_errors)}"
    )
    print(f"retried inside librdkafka: {dict(traffic.retried.errors)}", flush=True)


# -- followers' lag ---------------------------------------------------------------------------


class LogEnd:
    """One replica's log end for a partition directory, read from its segment files as the
    broker writes them (a batch in one write; a batch not yet whole is not counted), and,
    with `keep_batches`, each batch's (next offset, max timestamp)."""

    def __init__(self, directory: Path, keep_batches: bool = False) -> None:
        self.directory = directory
        self.keep_batches = keep_batches
        self.segment: Path | None = None
        self.position = 0
        self.end = 0
        self.next_offsets: list[int] = []
        self.timestamps: list[int] = []

    def read(self) -> int:
        # Listed before reading: a segment that has a later one was sealed before this
        # listing, so what is read of it below is all of it.
        segments = sorted(self.directory.glob("*.log"))
        if not segments:
            return self.end
        self.segment = self.segment or segments[0]
        while True:
            with open(self.segment, "rb") as f:
                f.seek(self.position)
                data = f.read()
            for _, header in iter_batches(data):
                self.end = header.next_offset
                self.position += header.size
                if self.keep_batches:
                    self.next_offsets.append(header.next_offset)
                    self.timestamps.append(header.max_timestamp)
            later = [s for s in segments if s > self.segment]
            if not later:
                return self.end
            self.segment, self.position = later[0], 0


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def measure_lag(
    cluster: Cluster, rate: int, seconds: float, interval_ms: int, lag_max_ms: int, acks: str
) -> None:
    print(
        f"\n== followers' lag: acks={acks} at {rate:,} msg/s for {seconds:.0f} s, sampled every "
        f"{interval_ms} ms ==",
        flush=True,
    )
    topic = fresh("lag")
    create_topic(
        cluster, topic, 3, {"min.insync.replicas": "2", "message.timestamp.type": "LogAppendTime"}
    )
    samples: dict[int, list[tuple[int, int]]] = {}
    with ZkWatch(cluster, topic) as states:
        _, state = states.wait(lambda s: len(s.isr) == 3)
        leader = state.leader
        followers = [b for b in state.isr if b != leader]
        ends = {
            b: LogEnd(cluster.broker(b).log_dir / f"{topic}-0", keep_batches=b == leader)
            for b in state.isr
        }
        samples = {f: [] for f in followers}
        conf = {"acks": acks, "enable.idempotence": acks == "all"}
        with PacedProducer(cluster.bootstrap, topic, rate, conf) as traffic:
            traffic.wait_acked_since(0, rate)  # a second to settle
            started = time.monotonic()
            while time.monotonic() - started < seconds:
                seen = [(f, ends[f].read(), now_ms()) for f in followers]
                ends[leader].read()
                for f, end, at_ms in seen:
                    samples[f].append(_lag(ends[leader], end, at_ms))
                time.sleep(interval_ms / SECOND_MS)
            sent = len(traffic.sent_at)
        shrinks = sum(
            1 for (_, a), (_, b) in zip(states.changes, states.changes[1:], strict=False)
            if len(b.isr) < len(a.isr)
        )  # fmt: skip
    # Measured from the sampling's start: the first writes to a new partition can wait for
    # a follower's fetch already parked at the leader (replica.fetch.wait.max.ms).
    latencies = traffic.latencies_ms(since=started)
    print(
        f"leader {leader}, {sent:,} sent, {len(traffic.acked):,} acknowledged; "
        f"acks={acks} latency median {percentile(latencies, 0.5):.1f} ms, "
        f"p99 {percentile(latencies, 0.99):.1f} ms, max {max(latencies):.0f} ms; "
        f"ISR shrinks {shrinks}"
    )
    print("| follower | samples | lag msgs median / p99 / max | lag ms median / p99 / max |")
    worst = 0.0
    for f, values in samples.items():
        msgs = [m for m, _ in values]
        ms = [t for _, t in values]
        worst = max(worst, percentile(ms, 0.99))
        print(
            f"| {f} | {len(values):,} | {percentile(msgs, 0.5):.0f} / "
            f"{percentile(msgs, 0.99):.0f} / {max(msgs)} | {percentile(ms, 0.5):.0f} / "
            f"{percentile(ms, 0.99):.0f} / {max(ms)} |"
        )
    print(
        f"p99 lag {worst:.0f} ms / replica.lag.time.max.ms {lag_max_ms}: "
        f"{worst / lag_max_ms:.3f} (target < 1)",
        flush=True,
    )


def _lag(leader: LogEnd, follower_end: int, at_ms: int) -> tuple[int, int]:
    """What the follower at `follower_end` lacked at `at_ms` of what the leader had appended
    by then: messages, and how long the oldest of them had been in the leader's log."""
    missing = bisect_right(leader.next_offsets, follower_end)  # the first batch it lacks
    if missing == len(leader.next_offsets) or leader.timestamps[missing] > at_ms:
        return 0, 0
    last = missing
    while last + 1 < len(leader.timestamps) and leader.timestamps[last + 1] <= at_ms:
        last += 1
    return leader.next_offsets[last] - follower_end, at_ms - leader.timestamps[missing]


# -- main -----------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default=",".join(MEASURES), help="comma-separated measures")
    parser.add_argument("--messages", type=int, default=2_000_000, help="per throughput run")
    parser.add_argument("--runs", type=int, default=3, help="throughput runs")
    parser.add_argument("--soak", type=int, default=3, help="kills in a row")
    parser.add_argument("--shutdowns", type=int, default=3, help="controlled shutdowns in a row")
    parser.add_argument("--rate", type=int, default=1000, help="msg/s while killing, stopping")
    parser.add_argument("--lag-rate", type=int, default=5000, help="msg/s while sampling lag")
    parser.add_argument("--lag-seconds", type=float, default=30.0)
    parser.add_argument("--lag-interval-ms", type=int, default=10)
    parser.add_argument("--lag-acks", default="all", help="the producer's acks while sampling")
    parser.add_argument("--session-timeout-ms", type=int, default=6000)
    parser.add_argument(
        "--zookeeper-tick-ms", type=int, default=2000, help="sessions expire on tick boundaries"
    )
    parser.add_argument("--replica-lag-ms", type=int, default=10000)
    parser.add_argument("--work", type=Path, help="keep the cluster's files and logs here")
    parser.add_argument(
        "--producer-conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="librdkafka setting of the producer killed and stopped under (repeatable)",
    )
    args = parser.parse_args()
    only = set(args.only.split(","))
    producer_conf = dict(kv.split("=", 1) for kv in args.producer_conf)
    if only - set(MEASURES):
        parser.error(f"--only: unknown {sorted(only - set(MEASURES))}; known {MEASURES}")
    overrides = {
        "zookeeper.session.timeout.ms": str(args.session_timeout_ms),
        "replica.lag.time.max.ms": str(args.replica_lag_ms),
    }
    client = f"; producer {producer_conf}" if producer_conf else ""
    with running_cluster(3, args.work, args.zookeeper_tick_ms, **overrides) as cluster:
        if "throughput" in only:
            measure_throughput(cluster, args.messages, args.runs)
        if "kill" in only:
            outages, traffic, check = run_outages(
                cluster, args.soak, args.rate, graceful=False, producer_conf=producer_conf
            )
            budget = (args.session_timeout_ms + SECOND_MS) / SECOND_MS
            report_outages(
                f"kill -9 of the leader, {args.soak} in a row, idempotent acks=all at "
                f"{args.rate} msg/s{client}; ZooKeeper tick {args.zookeeper_tick_ms} ms; budget "
                f"zookeeper.session.timeout.ms {args.session_timeout_ms} + 1 s",
                outages, traffic, check, budget,
            )  # fmt: skip
        if "shutdown" in only:
            outages, traffic, check = run_outages(
                cluster, args.shutdowns, args.rate, graceful=True, producer_conf=producer_conf
            )
            report_outages(
                f"controlled shutdown (SIGTERM) of the leader, {args.shutdowns} in a row, "
                f"idempotent acks=all at {args.rate} msg/s{client}; budget 1 s",
                outages, traffic, check, 1.0,
            )  # fmt: skip
        if "lag" in only:
            measure_lag(
                cluster,
                args.lag_rate,
                args.lag_seconds,
                args.lag_interval_ms,
                args.replica_lag_ms,
                args.lag_acks,
            )


if __name__ == "__main__":
    main()
