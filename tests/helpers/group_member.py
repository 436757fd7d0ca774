"""A confluent-kafka (librdkafka) group member that writes down what it does, for the group
tests against real brokers: each assignment and revocation, every record it consumed, each
commit it saw succeed or fail, one JSON line each with the time (`time.monotonic()`, the
machine's CLOCK_MONOTONIC, so lines of different processes compare).

It subscribes with `subscribe()`, polls one record at a time, commits the offsets after the
records it consumed synchronously every `commit_every_s` and when its partitions are revoked
(so a clean handover re-reads nothing); a member killed with SIGKILL leaves the records consumed
after its last commit to be read again by the next owner: the at-least-once window that
`tests/helpers/group_history.py` accounts for.

Run it in a thread (`MemberThread`) or as a process, so that SIGKILL is a real crash
(`MemberProcess`, which runs `python -m tests.helpers.group_member`); a process closes
cleanly (LeaveGroup) when it reads `close` on its stdin.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import Consumer, TopicPartition

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class MemberSpec:
    """How a member runs: its group, topic and client settings."""

    name: str
    bootstrap: str
    group: str
    topic: str
    events: Path  # where its JSON lines go
    session_timeout_ms: int = 6000
    heartbeat_interval_ms: int = 500
    instance_id: str | None = None  # group.instance.id: a static member
    commit_every_s: float = 0.3
    extra: dict[str, str] = field(default_factory=dict)  # more librdkafka settings

    def args(self) -> list[str]:
        args = [
            self.name, self.bootstrap, self.group, self.topic, str(self.events),
            "--session-timeout-ms", str(self.session_timeout_ms),
            "--heartbeat-interval-ms", str(self.heartbeat_interval_ms),
            "--commit-every-s", str(self.commit_every_s),
        ]  # fmt: skip
        if self.instance_id is not None:
            args += ["--instance-id", self.instance_id]
        for key, value in self.extra.items():
            args += ["--set", f"{key}={value}"]
        return args


class _Ledger:
    """A member's event log and its offsets consumed but not committed yet."""

    def __init__(self, out) -> None:
        self.out = out
        self.pending: dict[int, int] = {}  # partition -> next offset
        self.owned: set[int] = set()

    def note(self, event: str, **fields) -> None:
        self.out.write(json.dumps({"t": time.monotonic(), "ev": event, **fields}) + "\n")

    def consumed(self, partition: int, offset: int, value: bytes) -> None:
        self.note("consumed", p=partition, o=offset, v=value.decode())
        self.pending[partition] = offset + 1

    def commit(self, why: str, send: Callable[[dict[int, int]], None]) -> None:
        """Commit what is pending through `send` (synchronous; raises on failure)."""
        if not self.pending:
            return
        offsets = dict(self.pending)
        try:
            send(offsets)
        except Exception as exc:  # the client's own error types
            self.note("commit_failed", offsets=offsets, error=repr(exc), why=why)
            return
        self.note("committed", offsets=offsets, why=why)
        for p, o in offsets.items():
            if self.pending.get(p) == o:
                del self.pending[p]

    def assigned(self, partitions: set[int], **fields) -> None:
        self.owned |= partitions
        self.note("assign", partitions=sorted(partitions), **fields)

    def revoked(self, partitions: set[int]) -> None:
        # Only what it owns: kafka-python, closing in the middle of a rebalance, revokes
        # the partitions it gave up at the rebalance's start once more.
        partitions &= self.owned
        if not partitions:
            return
        self.owned -= partitions
        for p in partitions:
            self.pending.pop(p, None)  # not ours any more: a failed commit stays failed
        self.note("revoke", partitions=sorted(partitions))


def run_member(spec: MemberSpec, stop: Callable[[], bool]) -> None:
    """Consume with confluent-kafka as `spec` says until `stop()` is true, then commit and
    close (leaving the group, unless static)."""
    with open(spec.events, "a", buffering=1) as out:
        ledger = _Ledger(out)
        config = {
            "bootstrap.servers": spec.bootstrap,
            "group.id": spec.group,
            "client.id": spec.name,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": spec.session_timeout_ms,
            "heartbeat.interval.ms": spec.heartbeat_interval_ms,
            **spec.extra,
        }
        if spec.instance_id is not None:
            config["group.instance.id"] = spec.instance_id
        consumer = Consumer(config)

        def send(offsets: dict[int, int]) -> None:
            consumer.commit(
                offsets=[TopicPartition(spec.topic, p, o) for p, o in offsets.items()],
                asynchronous=False,
            )

        def assigned(c, partitions) -> None:
            ledger.assigned({tp.partition for tp in partitions}, member_id=c.memberid())

        def revoked(c, partitions) -> None:
            ledger.commit("revoke", send)
            ledger.revoked({tp.partition for tp in partitions})

        ledger.note("start", pid=os.getpid())
        consumer.subscribe([spec.topic], on_assign=assigned, on_revoke=revoked)
        last_commit = time.monotonic()
        while not stop():
            # One record a poll: a revocation served inside a poll is then never followed
            # by records of the partitions it took away (librdkafka drops those).
            msg = consumer.poll(0.05)
            if msg is not None and msg.error():
                ledger.note("error", error=str(msg.error()))
            elif msg is not None:
                ledger.consumed(msg.partition(), msg.offset(), msg.value())
            if time.monotonic() - last_commit >= spec.commit_every_s:
                ledger.commit("interval", send)
                last_commit = time.monotonic()
        ledger.commit("close", send)
        consumer.close()
        ledger.note("closed")


def run_kafka_python_member(spec: MemberSpec, stop: Callable[[], bool]) -> None:
    """The same with kafka-python's KafkaConsumer; `spec.extra["assignor"]` names its
    assignor (range, roundrobin, sticky, cooperative-sticky). It commits after each poll."""
    from kafka import ConsumerRebalanceListener, KafkaConsumer
    from kafka import TopicPartition as KTopicPartition
    from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
    from kafka.coordinator.assignors.range import RangePartitionAssignor
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
    from kafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor
    from kafka.structs import OffsetAndMetadata

    assignors = {
        a.name: a
        for a in (
            RangePartitionAssignor,
            RoundRobinPartitionAssignor,
            StickyPartitionAssignor,
            CooperativeStickyAssignor,
        )
    }
    with open(spec.events, "a", buffering=1) as out:
        ledger = _Ledger(out)
        consumer = KafkaConsumer(
            bootstrap_servers=spec.bootstrap,
            group_id=spec.group,
            client_id=spec.name,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            session_timeout_ms=spec.session_timeout_ms,
            heartbeat_interval_ms=spec.heartbeat_interval_ms,
            partition_assignment_strategy=[assignors[spec.extra.get("assignor", "range")]],
        )

        def send(offsets: dict[int, int]) -> None:
            consumer.commit(
                {
                    KTopicPartition(spec.topic, p): OffsetAndMetadata(o, "", -1)
                    for p, o in offsets.items()
                }  # fmt: skip
            )

        class Listener(ConsumerRebalanceListener):
            # Cooperative assignors add and take away partitions a few at a time; eager
            # ones revoke everything first: both are told as what changed.
            def on_partitions_revoked(self, revoked):
                ledger.commit("revoke", send)
                ledger.revoked({tp.partition for tp in revoked})

            def on_partitions_assigned(self, assigned):
                group = consumer.group_metadata()
                ledger.assigned({tp.partition for tp in assigned}, member_id=group.member_id,
                                generation=group.generation_id)  # fmt: skip

        ledger.note("start", pid=os.getpid())
        consumer.subscribe([spec.topic], listener=Listener())
        while not stop():
            for records in consumer.poll(timeout_ms=50).values():
                for r in records:
                    ledger.consumed(r.partition, r.offset, r.value)
            ledger.commit("interval", send)
        ledger.commit("close", send)
        consumer.close()
        ledger.note("closed")


class MemberThread:
    """A member in a thread of the test's process."""

    def __init__(self, spec: MemberSpec, run: Callable = run_member) -> None:
        self.spec = spec
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=run, args=(spec, self._stop.is_set), name=spec.name, daemon=True
        )

    def start(self) -> MemberThread:
        self._thread.start()
        return self

    def close(self, timeout_s: float = 30.0) -> None:
        self._stop.set()
        self._thread.join(timeout_s)
        assert not self._thread.is_alive(), f"{self.spec.name} did not close"


class MemberProcess:
    """A member in a process of its own: `kill()` is a SIGKILL (no LeaveGroup, no commit)."""

    def __init__(self, spec: MemberSpec) -> None:
        self.spec = spec
        self.proc: subprocess.Popen | None = None
        self.killed_at: float | None = None

    def start(self) -> MemberProcess:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.helpers.group_member", *self.spec.args()],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=open(self.spec.events.with_suffix(".stderr"), "ab"),
        )
        return self

    def close(self, timeout_s: float = 30.0) -> None:
        """Ask it to commit and leave the group, and wait until it has."""
        assert self.proc is not None
        self.proc.stdin.write(b"close\n")
        self.proc.stdin.close()
        assert self.proc.wait(timeout_s) == 0, f"{self.spec.name} exited badly"

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        self.killed_at = time.monotonic()

    def stop_quietly(self) -> None:
        """For clean-up after a failed test."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for name in ("name", "bootstrap", "group", "topic", "events"):
        parser.add_argument(name)
    parser.add_argument("--session-timeout-ms", type=int, default=6000)
    parser.add_argument("--heartbeat-interval-ms", type=int, default=500)
    parser.add_argument("--commit-every-s", type=float, default=0.3)
    parser.add_argument("--instance-id")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    a = parser.parse_args(argv)
    spec = MemberSpec(
        a.name, a.bootstrap, a.group, a.topic, Path(a.events), a.session_timeout_ms,
        a.heartbeat_interval_ms, a.instance_id, a.commit_every_s,
        dict(kv.split("=", 1) for kv in a.set),
    )  # fmt: skip
    closing = threading.Event()

    def wait_for_close() -> None:
        for line in sys.stdin:
            if line.strip() == "close":
                break
        closing.set()  # also when the test's end of the pipe goes away

    threading.Thread(target=wait_for_close, daemon=True).start()
    run_member(spec, closing.is_set)


if __name__ == "__main__":
    main()
