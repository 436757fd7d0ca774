"""Transactions on a broker process, the group side and our consumers' side. Transactional offset commits (docs/contracts/consumer-groups.md,
"Transactional offsets"): a TxnOffsetCommit sent raw stays invisible to OffsetFetch
(confluent-kafka's committed() at read_uncommitted sees the last plain commit; a
require_stable fetch is UNSTABLE_OFFSET_COMMIT) until the transaction's marker reaches the
group's offsets partition through WriteTxnMarkers: COMMIT makes it the committed offset,
ABORT drops it (tests/coordinator/test_txn_offsets.py covers the rules and the load in
process)."""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, TopicPartition

from broker.client.group import GroupConsumer
from broker.client.simple_consumer import SimpleConsumer
from broker.coordinator.offsets_topic import OFFSETS_TOPIC, partition_for
from broker.processes import BrokerProcess
from broker.protocol.apis import (
    OFFSET_COMMIT,
    OFFSET_FETCH,
    PRODUCE,
    TXN_OFFSET_COMMIT,
    WRITE_TXN_MARKERS,
)
from broker.protocol.errors import ErrorCode as E
from tests.groups.conftest import GROUP_SETTINGS
from tests.helpers.cluster import create_topic, fresh, wait_for
from tests.helpers.group_state import connect, coordinator_of
from tests.helpers.groups import commit_body, partition_errors, txn_commit_body
from tests.helpers.server_requests import (
    RAW_TXN_SETTINGS,
    marker_body,
    produce_body,
    txn_records,
    values,
)

pytestmark = pytest.mark.clients

PID = 91_000
OFFSETS_PARTITIONS = 50  # the shared broker's offsets.topic.num.partitions (the default)


@pytest.fixture(scope="module")
def group_broker(tmp_path_factory):
    """GROUP_SETTINGS, and raw transactional produces name a transactional id no
    coordinator knows (tests.helpers.server_requests.RAW_TXN_SETTINGS)."""
    settings = {**GROUP_SETTINGS, **RAW_TXN_SETTINGS}
    with BrokerProcess(tmp_path_factory.mktemp("groups") / "logs", settings) as b:
        yield b


def stable_fetch(conn, group: str, topic: str) -> tuple[int, int]:
    """(offset, error) of partition 0 by OffsetFetch v7 with require_stable."""
    body = {"group_id": group, "topics": [{"name": topic, "partition_indexes": [0]}]}
    answer = conn.request(OFFSET_FETCH, {**body, "require_stable": True}, 7)
    (partition,) = answer["topics"][0]["partitions"]
    return partition["committed_offset"], partition["error_code"]


def test_txn_offset_commit_is_pending_until_its_transaction_ends(group_broker):
    topic, group = fresh("txn-offsets"), fresh("txn-group")
    create_topic(group_broker, topic, 1, factor=1)
    wait_for(lambda: coordinator_of(group_broker.bootstrap, group) is not None, "a coordinator")
    with connect(group_broker.bootstrap, client_id="txn-offsets") as conn:
        plain = conn.request(OFFSET_COMMIT, commit_body(group, {(topic, 0): 5}), 7)
        assert set(partition_errors(plain).values()) == {0}
        body = txn_commit_body(group, {(topic, 0): 42}, PID, producer_epoch=0)
        answer = conn.request(TXN_OFFSET_COMMIT, body, 3)
        assert partition_errors(answer) == {(topic, 0): 0}
        assert stable_fetch(conn, group, topic) == (-1, E.UNSTABLE_OFFSET_COMMIT)

        assert committed(group_broker.bootstrap, group, topic) == 5

        assert end_transaction(conn, group, commit=True) == [0]
        assert stable_fetch(conn, group, topic) == (42, 0)
        assert committed(group_broker.bootstrap, group, topic) == 42

        body = txn_commit_body(group, {(topic, 0): 77}, PID, producer_epoch=0)
        assert partition_errors(conn.request(TXN_OFFSET_COMMIT, body, 3)) == {(topic, 0): 0}
        assert end_transaction(conn, group, commit=False) == [0]
        assert stable_fetch(conn, group, topic) == (42, 0)
        assert committed(group_broker.bootstrap, group, topic) == 42


def end_transaction(conn, group: str, commit: bool) -> list[int]:
    """The transaction coordinator's marker for PID on the group's offsets partition."""
    index = partition_for(group, OFFSETS_PARTITIONS)
    answer = conn.request(WRITE_TXN_MARKERS, marker_body(PID, OFFSETS_TOPIC, commit, (index,)))
    return [p["error_code"] for p in answer["markers"][0]["topics"][0]["partitions"]]


def committed(bootstrap: str, group: str, topic: str) -> int:
    """confluent-kafka's committed() of partition 0 at read_uncommitted (no require_stable)."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "isolation.level": "read_uncommitted"}
    )
    try:
        (tp,) = consumer.committed([TopicPartition(topic, 0)], timeout=10)
        return tp.offset
    finally:
        consumer.close()


def test_our_consumers_read_committed_skip_aborted_records(group_broker):
    """Transactional batches produced raw (producer A aborted, B committed, C still open),
    markers through WriteTxnMarkers; our SimpleConsumer and GroupConsumer at each level."""
    topic = fresh("read-committed")
    create_topic(group_broker, topic, 1, factor=1)
    a, b, c = PID + 1, PID + 2, PID + 3
    with connect(group_broker.bootstrap, client_id="txn-producer") as conn:

        def produce(records: bytes) -> None:
            (p,) = conn.request(PRODUCE, produce_body(topic, records), 8)["responses"][0][
                "partition_responses"
            ]
            assert p["error_code"] == 0, p

        def marker(pid: int, commit: bool) -> None:
            answer = conn.request(WRITE_TXN_MARKERS, marker_body(pid, topic, commit))
            assert answer["markers"][0]["topics"][0]["partitions"][0]["error_code"] == 0

        produce(txn_records(a, b"a1", b"a2"))  # offsets 0-1
        produce(txn_records(b, b"b1"))  # 2
        produce(values(b"plain"))  # 3
        marker(a, commit=False)  # 4
        marker(b, commit=True)  # 5
        produce(txn_records(c, b"c1"))  # 6: open, so the last stable offset stays at 6

    def read(level: str) -> tuple[list[bytes], int]:
        with SimpleConsumer(group_broker.bootstrap, isolation_level=level) as simple:
            result = simple.fetch(topic, 0, 0)
            return [r.value for r in result.records()], simple.latest_offset(topic, 0)

    assert read("read_committed") == ([b"b1", b"plain"], 6)
    assert read("read_uncommitted") == ([b"a1", b"a2", b"b1", b"plain", b"c1"], 7)

    with GroupConsumer(
        group_broker.bootstrap, isolation_level="read_committed", enable_auto_commit=False
    ) as consumer:
        consumer.assign([(topic, 0)])
        consumer.seek((topic, 0), 0)
        seen = []
        wait_for(lambda: seen.extend(r.value for r in consumer.poll(0.5)) or len(seen) >= 2)
        assert seen == [b"b1", b"plain"]
        assert consumer.position((topic, 0)) == 6  # stops before the open transaction
