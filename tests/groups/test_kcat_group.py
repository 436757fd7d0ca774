"""kcat in balanced-consumer mode (`kcat -G <group> <topic>`) as a member of a group, next
to a confluent-kafka member: the partitions split between them, each record consumed by
the one owning its partition, kcat's offsets committed when it exits."""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import threading

import pytest

from tests.helpers.cluster import Traffic, create_topic, fresh, wait_for
from tests.helpers.group_history import assigned_now, read_events
from tests.helpers.group_member import MemberSpec, MemberThread
from tests.helpers.group_state import committed_offsets, end_offsets

pytestmark = [
    pytest.mark.clients,
    pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed"),
]

PARTITIONS = 4


class KcatMember:
    """`kcat -G` as a process; its records (partition, offset, value) and its stderr lines
    (where it reports each rebalance) are collected as they come."""

    def __init__(self, bootstrap: str, group: str, topic: str) -> None:
        command = [
            "kcat", "-b", bootstrap, "-G", group, "-u", "-f", r"%p %o %s\n",
            "-X", "auto.offset.reset=earliest", "-X", "session.timeout.ms=6000", topic,
        ]  # fmt: skip
        self.proc = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.records: list[tuple[int, int, str]] = []
        self.stderr: list[str] = []
        self._readers = [
            threading.Thread(target=self._read_records, daemon=True),
            threading.Thread(target=self._read_stderr, daemon=True),
        ]
        for reader in self._readers:
            reader.start()

    def _read_records(self) -> None:
        for line in self.proc.stdout:
            p, o, v = line.rstrip("\n").split(" ", 2)
            self.records.append((int(p), int(o), v))

    def _read_stderr(self) -> None:
        for line in self.proc.stderr:
            self.stderr.append(line.rstrip("\n"))

    def assigned(self) -> set[int] | None:
        """The partitions of kcat's last assignment report, None before the first."""
        reports = [line for line in self.stderr if "assigned:" in line]
        if not reports:
            return None
        return {int(p) for p in re.findall(r"\[(\d+)\]", reports[-1].split("assigned:", 1)[1])}

    def stop(self) -> int:
        """SIGTERM: kcat closes its consumer (committing what it consumed) and exits."""
        self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(30)
        for reader in self._readers:
            reader.join(10)
        return code

    def kill_quietly(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def test_kcat_consumes_as_a_group_member_beside_confluent_kafka(group_broker, tmp_path):
    bootstrap = group_broker.bootstrap
    topic, group = fresh("kcat"), fresh("kcat-group")
    create_topic(group_broker, topic, PARTITIONS, factor=1)
    member = MemberThread(
        MemberSpec("confluent", bootstrap, group, topic, tmp_path / "confluent.events")
    ).start()
    kcat = KcatMember(bootstrap, group, topic)
    try:

        def split():
            ours, theirs = assigned_now(read_events(member.spec.events)), kcat.assigned()
            if not ours or not theirs:
                return None
            return (ours, theirs) if sorted(ours | theirs) == list(range(PARTITIONS)) else None

        ours, theirs = wait_for(split, "kcat and the confluent member sharing the partitions")
        assert not ours & theirs and len(ours) == len(theirs) == 2
        with Traffic(bootstrap, topic, partitions=PARTITIONS, rate=400) as traffic:
            traffic.wait_acked(400)
        expected = set(traffic.positions)
        wait_for(lambda: len(kcat.records) >= sum(p in theirs for p, _ in expected), "kcat read")
        member_ends = end_offsets(bootstrap, topic, PARTITIONS)
        wait_for(
            lambda: all(
                committed_offsets(bootstrap, group).get((topic, p)) == member_ends[(topic, p)]
                for p in ours
            ),
            "the confluent member's commits",
        )
        assert kcat.stop() == 0
        member.close()
    finally:
        kcat.kill_quietly()

    assert traffic.errors == []
    by_kcat = [(p, o) for p, o, _ in kcat.records]
    by_member = [(e["p"], e["o"]) for e in read_events(member.spec.events) if e["ev"] == "consumed"]
    # Each record once, by its partition's owner; no rebalance moved anything meanwhile.
    assert sorted(by_kcat + by_member) == sorted(expected)
    assert {p for p, _ in by_kcat} == theirs and {p for p, _ in by_member} == ours
    values = {(p, o): v for p, o, v in kcat.records}
    acked = dict(zip(traffic.positions, traffic.acked, strict=True))
    assert all(values[key] == acked[key].decode() for key in by_kcat)
    assert committed_offsets(bootstrap, group) == end_offsets(bootstrap, topic, PARTITIONS)
