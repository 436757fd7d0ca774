"""Transactional requests as a producer sends them (`*_body`: bodies keyed as the API
declarations, also sent to broker processes over `BrokerConnection`), and for the
in-process tests their answers (waiting ones answered once the broker's loop ran)."""

from __future__ import annotations

import asyncio

from broker.client.connection import BrokerConnection
from broker.protocol.apis import (
    ADD_OFFSETS_TO_TXN,
    ADD_PARTITIONS_TO_TXN,
    CREATE_TOPICS,
    END_TXN,
    INIT_PRODUCER_ID,
)
from tests.helpers.groups import find_coordinator
from tests.helpers.inprocess_broker import Respond, Wait

TRANSACTION_KEY = 1


def raw_request(address: str, api_key: int, body: dict, version: int | None = None) -> dict:
    """One request to a broker process at `address` ("host:port") on its own connection."""
    host, port = address.rsplit(":", 1)
    connection = BrokerConnection(host, int(port))
    try:
        return connection.request(api_key, body, version)
    finally:
        connection.close()


def raw_created_topic(address: str, topic: str, partitions: int = 1) -> str:
    """`topic`, created (replication factor 1) with a raw CreateTopics."""
    created = raw_request(address, CREATE_TOPICS, {
        "topics": [{"name": topic, "num_partitions": partitions, "replication_factor": 1,
                    "assignments": [], "configs": []}],
        "timeout_ms": 10000, "validate_only": False,
    })  # fmt: skip
    assert created["topics"][0]["error_code"] == 0
    return topic


def init_body(txn_id: str | None, timeout_ms: int = 60000, pid: int = -1, epoch: int = -1) -> dict:
    return {
        "transactional_id": txn_id,
        "transaction_timeout_ms": timeout_ms,
        "producer_id": pid,
        "producer_epoch": epoch,
    }


def add_partitions_body(txn_id: str, pid: int, epoch: int, partitions: dict) -> dict:
    """`partitions`: topic -> partition indexes."""
    return {
        "v3_and_below_transactional_id": txn_id,
        "v3_and_below_producer_id": pid,
        "v3_and_below_producer_epoch": epoch,
        "v3_and_below_topics": [{"name": t, "partitions": ps} for t, ps in partitions.items()],
    }


def end_body(txn_id: str, pid: int, epoch: int, commit: bool) -> dict:
    return {
        "transactional_id": txn_id,
        "producer_id": pid,
        "producer_epoch": epoch,
        "committed": commit,
    }


def add_offsets_body(txn_id: str, pid: int, epoch: int, group: str) -> dict:
    return {
        "transactional_id": txn_id,
        "producer_id": pid,
        "producer_epoch": epoch,
        "group_id": group,
    }


# -- in process ------------------------------------------------------------------------------


def run_loop(broker, rounds: int = 20) -> None:
    """Let the broker's loop run its spawned work (loads, marker rounds, retries)."""
    for _ in range(rounds):
        broker.loop.run_until_complete(asyncio.sleep(0.001))


def answer(broker, api: int, version: int, body: dict) -> dict:
    """The answer, waiting for a state write (and the loop) if need be."""
    outcome = broker.send(api, version, body)
    for _ in range(50):
        if not isinstance(outcome, Wait):
            break
        done = broker.answer_of(outcome)
        if done is not None:
            outcome = done
            break
        run_loop(broker, 1)
    assert isinstance(outcome, Respond), outcome
    return broker.decode(api, version, outcome)


def ready(broker, txn_id: str = "tx") -> dict:
    """FindCoordinator (key type 1) until __transaction_state exists and is loaded."""
    for _ in range(20):
        found = find_coordinator(broker, txn_id, key_type=TRANSACTION_KEY)
        run_loop(broker)
        if found["error_code"] == 0:
            return found
    raise AssertionError(f"no transaction coordinator: {found}")


def init(broker, txn_id: str, version: int = 4, **kw) -> dict:
    return answer(broker, INIT_PRODUCER_ID, version, init_body(txn_id, **kw))


def add_partitions(broker, txn_id, pid, epoch, partitions, version: int = 3) -> dict:
    """(topic, partition) -> error code."""
    body = add_partitions_body(txn_id, pid, epoch, partitions)
    got = answer(broker, ADD_PARTITIONS_TO_TXN, version, body)
    return {
        (t["name"], p["partition_index"]): p["partition_error_code"]
        for t in got["results_by_topic_v3_and_below"]
        for p in t["results_by_partition"]
    }


def end(broker, txn_id, pid, epoch, commit: bool, version: int = 3) -> int:
    return answer(broker, END_TXN, version, end_body(txn_id, pid, epoch, commit))["error_code"]


def add_offsets(broker, txn_id, pid, epoch, group: str, version: int = 3) -> int:
    body = add_offsets_body(txn_id, pid, epoch, group)
    return answer(broker, ADD_OFFSETS_TO_TXN, version, body)["error_code"]
