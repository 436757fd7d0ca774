"""MirrorMaker copies only committed records (broker/mirror/README.md): the source topic
holds a committed and an aborted transaction (raw transactional batches ended through
WriteTxnMarkers) between plain records; the mirror tool, run in process between two
broker processes, writes the plain and committed records to the target, never the
aborted ones or the markers, and `--verify` finds nothing missing. A consumer file asking
for read_uncommitted is refused."""

from __future__ import annotations

import io
import threading

import pytest

from broker.client.admin import AdminClient, NewTopic
from broker.client.producer import Producer
from broker.client.simple_consumer import SimpleConsumer
from broker.processes import BrokerProcess
from broker.protocol.apis import PRODUCE, WRITE_TXN_MARKERS
from broker.tools import mirror_maker
from broker.tools.output import Output
from tests.helpers.cluster import fresh, wait_for
from tests.helpers.group_state import connect
from tests.helpers.server_requests import (
    RAW_TXN_SETTINGS,
    marker_body,
    produce_body,
    txn_records,
)

pytestmark = pytest.mark.clients

ABORTED_PID, COMMITTED_PID = 880_001, 880_002


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    """The module's broker: raw transactional produces name a transactional id no
    coordinator knows (tests.helpers.server_requests.RAW_TXN_SETTINGS); the mirror's group
    forms at once (no initial rebalance delay)."""
    settings = {**RAW_TXN_SETTINGS, "group.initial.rebalance.delay.ms": "0"}
    with BrokerProcess(tmp_path_factory.mktemp("broker") / "logs", settings) as b:
        yield b


def write_source(bootstrap: str, topic: str) -> None:
    with AdminClient(bootstrap) as admin:
        admin.create_topics([NewTopic(topic, 1)])
    with Producer(bootstrap, acks=-1, linger_ms=0) as plain, connect(bootstrap) as conn:

        def transactional(pid: int, *values: bytes) -> None:
            answer = conn.request(PRODUCE, produce_body(topic, txn_records(pid, *values)), 8)
            assert answer["responses"][0]["partition_responses"][0]["error_code"] == 0

        def end(pid: int, commit: bool) -> None:
            answer = conn.request(WRITE_TXN_MARKERS, marker_body(pid, topic, commit))
            assert answer["markers"][0]["topics"][0]["partitions"][0]["error_code"] == 0

        plain.send(topic, b"p1", partition=0).result(10)
        transactional(ABORTED_PID, b"a1", b"a2")
        transactional(COMMITTED_PID, b"b1", b"b2")
        plain.send(topic, b"p2", partition=0).result(10)
        end(ABORTED_PID, commit=False)
        end(COMMITTED_PID, commit=True)
        plain.send(topic, b"p3", partition=0).result(10)


def values_in(bootstrap: str, topic: str) -> list[bytes]:
    with SimpleConsumer(bootstrap) as consumer:  # read_uncommitted: whatever is there
        consumer.cluster.refresh([topic])
        if topic not in consumer.cluster.topics:
            return []
        result = consumer.fetch(topic, 0, 0)
        return [r.value for r in result.records()]


def properties(tmp_path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_the_mirror_copies_committed_records_only(broker, broker_factory, tmp_path):
    target = broker_factory()
    topic = fresh("mirrored-txn")
    write_source(broker.bootstrap, topic)
    # One partition at the target too, so the copy keeps the source's order in one place.
    with AdminClient(target.bootstrap) as admin:
        admin.create_topics([NewTopic(topic, 1)])
    args = [
        "--consumer.config",
        properties(
            tmp_path,
            "source.properties",
            f"bootstrap.servers={broker.bootstrap}\ngroup.id={fresh('mirror')}\n",
        ),
        "--producer.config",
        properties(tmp_path, "target.properties", f"bootstrap.servers={target.bootstrap}\n"),
        "--whitelist",
        topic,
        "--offset.commit.interval.ms",
        "200",
    ]
    stop = threading.Event()
    codes: list[int] = []
    out = Output(io.StringIO(), io.StringIO())
    mirror = threading.Thread(target=lambda: codes.append(mirror_maker.main(args, out, stop)))
    mirror.start()
    try:
        wait_for(lambda: len(values_in(target.bootstrap, topic)) >= 5, "the mirrored records")
    finally:
        stop.set()
        mirror.join(60)
    assert codes == [0]
    assert values_in(target.bootstrap, topic) == [b"p1", b"b1", b"b2", b"p2", b"p3"]
    with SimpleConsumer(target.bootstrap) as consumer:
        assert consumer.latest_offset(topic, 0) == 5  # no markers, no aborted records

    verify = Output(io.StringIO(), io.StringIO())
    assert mirror_maker.main([*args, "--verify"], verify) == 0
    row = next(line for line in verify.out.getvalue().splitlines() if line.startswith(topic))
    assert row.split()[1:] == ["5", "5", "0", "0", "0"]


def test_a_read_uncommitted_mirror_is_refused(broker, tmp_path):
    consumer = properties(
        tmp_path,
        "source.properties",
        f"bootstrap.servers={broker.bootstrap}\ngroup.id=g\nisolation.level=read_uncommitted\n",
    )
    producer = properties(tmp_path, "target.properties", f"bootstrap.servers={broker.bootstrap}\n")
    err = io.StringIO()
    argv = ["--consumer.config", consumer, "--producer.config", producer, "--whitelist", "x"]
    assert mirror_maker.main(argv, Output(io.StringIO(), err)) == 2
    assert "isolation.level=read_uncommitted is not allowed" in err.getvalue()
