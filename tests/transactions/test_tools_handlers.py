"""The transaction tools' APIs in process (KIP-664): DescribeProducers from a leader's
producer state, DescribeTransactions and ListTransactions from the coordinator's, their
ACLs, and the metrics of open transactions and the last stable offset."""

from __future__ import annotations

from prometheus_client.core import CollectorRegistry
from prometheus_client.exposition import generate_latest

from broker.metrics.state import BrokerStateCollector
from broker.protocol.apis import DESCRIBE_PRODUCERS, DESCRIBE_TRANSACTIONS, LIST_TRANSACTIONS
from broker.protocol.errors import ErrorCode as E
from broker.security.acl import Operation as Op
from broker.security.acl import ResourceType as R
from tests.helpers import transactions as tx
from tests.helpers.acls import ADMIN, AUTHORIZER_SETTINGS, allow, as_principal
from tests.helpers.server_requests import (
    RAW_TXN_SETTINGS,
    create,
    produce,
    txn_records,
    values,
    write_marker,
)
from tests.transactions.test_wiring import Leaders, _close, _open


def _producers(b, topic="t", partitions=(0,)) -> dict:
    body = {"topics": [{"name": topic, "partition_indexes": list(partitions)}]}
    answer = b.call(DESCRIBE_PRODUCERS, 0, body)
    return {p["partition_index"]: p for p in answer["topics"][0]["partitions"]}


def _describe(b, *ids) -> list[dict]:
    return b.call(DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": list(ids)})["transaction_states"]


def _list(b, states=(), pids=(), duration=-1, version=1) -> dict:
    body = {"state_filters": list(states), "producer_id_filters": list(pids)}
    if version >= 1:
        body["duration_filter"] = duration
    return b.call(LIST_TRANSACTIONS, version, body)


def test_describe_producers_shows_open_transactions_and_markers(tmp_path):
    b = _open(tmp_path / "logs", Leaders(), **RAW_TXN_SETTINGS)
    try:
        create(b, "t", partitions=1)
        assert produce(b, "t", values(b"plain"))["error_code"] == 0
        assert produce(b, "t", txn_records(7000, b"a", b"b", epoch=3))["error_code"] == 0
        (p,) = _producers(b).values()
        assert p["error_code"] == 0
        (producer,) = p["active_producers"]
        assert producer == {
            "producer_id": 7000, "producer_epoch": 3, "last_sequence": 1,
            "last_timestamp": 1001, "coordinator_epoch": -1, "current_txn_start_offset": 1,
        }  # fmt: skip
        # The marker closes it and records its coordinator epoch.
        assert write_marker(b, 7000, "t", False, epoch=3, coordinator_epoch=4) == [0]
        (producer,) = _producers(b)[0]["active_producers"]
        assert (producer["current_txn_start_offset"], producer["coordinator_epoch"]) == (-1, 4)
        # A partition that does not exist, one this broker does not host.
        assert _producers(b, partitions=(5,))[5]["error_code"] == E.UNKNOWN_TOPIC_OR_PARTITION
        assert _producers(b, "nope")[0]["error_code"] == E.UNKNOWN_TOPIC_OR_PARTITION
    finally:
        _close(b)


def test_describe_and_list_transactions(tmp_path):
    b = _open(tmp_path / "logs", Leaders(), **RAW_TXN_SETTINGS)
    try:
        create(b, "t", partitions=2)
        tx.ready(b)
        pid = tx.init(b, "tx", timeout_ms=30000)["producer_id"]
        other = tx.init(b, "idle")["producer_id"]
        tx.add_partitions(b, "tx", pid, 0, {"t": [1, 0]})
        (d,) = _describe(b, "tx")
        assert d["error_code"] == 0 and d["transaction_state"] == "Ongoing"
        assert (d["producer_id"], d["producer_epoch"], d["transaction_timeout_ms"]) == (
            pid, 0, 30000,
        )  # fmt: skip
        assert d["transaction_start_time_ms"] > 0
        assert d["topics"] == [{"topic": "t", "partitions": [0, 1]}]
        (unknown,) = _describe(b, "never")
        assert unknown["error_code"] == E.TRANSACTIONAL_ID_NOT_FOUND

        listed = _list(b)
        assert listed["error_code"] == 0
        assert [(t["transactional_id"], t["producer_id"], t["transaction_state"])
                for t in listed["transaction_states"]] == [
            ("idle", other, "Empty"), ("tx", pid, "Ongoing")]  # fmt: skip
        ongoing = _list(b, states=["Ongoing", "Bogus"])
        assert [t["transactional_id"] for t in ongoing["transaction_states"]] == ["tx"]
        assert ongoing["unknown_state_filters"] == ["Bogus"]
        assert [t["transactional_id"] for t in _list(b, pids=[other])["transaction_states"]] == [
            "idle"
        ]
        # KIP-994: only transactions open longer than the duration; v0 has no filter.
        assert _list(b, duration=3_600_000)["transaction_states"] == []
        assert [t["transactional_id"] for t in _list(b, duration=0, version=0)[
            "transaction_states"]] == ["idle", "tx"]  # fmt: skip

        # Metrics: one open transaction here, none of the partitions' LSO held yet.
        registry = CollectorRegistry()
        registry.register(BrokerStateCollector(b.state, dict))
        text = generate_latest(registry).decode()
        assert "kafka_transactions_open 1.0" in text
        assert 'kafka_transactional_ids{state="Empty"} 1.0' in text
        assert produce(b, "t", txn_records(pid, b"x", b"y"))["error_code"] == 0
        text = generate_latest(registry).decode()
        assert 'kafka_log_stable_offset_lag{partition="0",topic="t"} 2.0' in text
        assert "kafka_partitions_with_open_transactions 1.0" in text
    finally:
        _close(b)


def test_the_tools_apis_follow_kafkas_acls(tmp_path):
    b = _open(tmp_path / "logs", Leaders(), **AUTHORIZER_SETTINGS, **RAW_TXN_SETTINGS)
    try:
        with as_principal(b, ADMIN):
            create(b, "t")
            tx.ready(b)
            tx.init(b, "mine")
            tx.init(b, "theirs")
        alice = "User:alice"
        allow(b, alice, Op.DESCRIBE, R.TRANSACTIONAL_ID, "mine")
        with as_principal(b, alice):
            assert _producers(b)[0]["error_code"] == E.TOPIC_AUTHORIZATION_FAILED
            states = {
                d["transactional_id"]: d["error_code"] for d in _describe(b, "mine", "theirs")
            }
            assert states == {"mine": 0, "theirs": E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}
            # Listing leaves out what alice may not describe, silently.
            listed = _list(b)
            assert listed["error_code"] == 0
            assert [t["transactional_id"] for t in listed["transaction_states"]] == ["mine"]
            # Aborting by hand is WriteTxnMarkers: CLUSTER_ACTION.
            assert write_marker(b, 1, "t", False) == [E.CLUSTER_AUTHORIZATION_FAILED]
        allow(b, alice, Op.READ, R.TOPIC, "t")
        with as_principal(b, alice):
            assert _producers(b)[0]["error_code"] == 0
    finally:
        _close(b)
