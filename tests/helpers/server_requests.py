"""Request bodies for the in-process tests, keyed as the API declarations are; `Wire`
sends the same through a socket to a broker process."""

from __future__ import annotations

from broker.client.connection import BrokerConnection
from broker.protocol.apis import CREATE_TOPICS, FETCH, LIST_OFFSETS, PRODUCE, WRITE_TXN_MARKERS
from broker.records.batch import build_batch
from broker.records.header import ATTRIBUTES_POS, TRANSACTIONAL


def create(broker, name: str, partitions: int = 1, configs: dict | None = None) -> dict:
    body = {
        "topics": [{
            "name": name, "num_partitions": partitions, "replication_factor": 1,
            "assignments": [],
            "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()],
        }],
        "timeout_ms": 1000, "validate_only": False,
    }  # fmt: skip
    (topic,) = broker.call(CREATE_TOPICS, 4, body)["topics"]
    return topic


# The transactional id raw requests name for transactional records (a Produce of them
# without one is refused, as Kafka does). No coordinator knows it: brokers these requests
# go to run with RAW_TXN_SETTINGS (no KIP-890 verification, which would refuse it).
RAW_TXN_ID = "raw-txn"
RAW_TXN_SETTINGS = {"transaction.partition.verification.enable": "false"}


def produce_body(topic: str, records: bytes, partition: int = 0, acks: int = -1) -> dict:
    attributes = records[ATTRIBUTES_POS + 1] if records and len(records) > 22 else 0
    transactional = attributes & TRANSACTIONAL
    return {
        "transactional_id": RAW_TXN_ID if transactional else None,
        "acks": acks, "timeout_ms": 1000,
        "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": records}]}],
    }  # fmt: skip


def produce(broker, topic: str, records: bytes, partition: int = 0, version: int = 8) -> dict:
    """The partition's answer to producing `records`."""
    answer = broker.call(PRODUCE, version, produce_body(topic, records, partition))
    (p,) = answer["responses"][0]["partition_responses"]
    return p


def values(*values: bytes, timestamp: int = 1_000, **kw) -> bytes:
    return build_batch([(None, v, timestamp + i, []) for i, v in enumerate(values)], **kw)


def fetch_body(
    topic: str, offset: int, partition: int = 0, max_wait_ms: int = 0, min_bytes: int = 1,
    max_bytes: int = 1 << 20, leader_epoch: int = -1, isolation_level: int = 0,
) -> dict:  # fmt: skip
    return {
        "replica_id": -1, "max_wait_ms": max_wait_ms, "min_bytes": min_bytes,
        "max_bytes": max_bytes, "isolation_level": isolation_level, "session_id": 0, "session_epoch": -1,
        "topics": [{"topic": topic, "partitions": [{
            "partition": partition, "current_leader_epoch": leader_epoch,
            "fetch_offset": offset, "log_start_offset": -1, "partition_max_bytes": max_bytes,
        }]}],
        "forgotten_topics_data": [], "rack_id": "",
    }  # fmt: skip


def fetch(broker, topic: str, offset: int, version: int = 11, **kw) -> dict:
    answer = broker.call(FETCH, version, fetch_body(topic, offset, **kw))
    (p,) = answer["responses"][0]["partitions"]
    return p


def list_offsets(
    broker, topic: str, timestamp: int, version: int = 7, epoch: int = -1, replica_id: int = -1,
    isolation_level: int = 0,
) -> dict:  # fmt: skip
    body = {
        "replica_id": replica_id, "isolation_level": isolation_level,
        "topics": [{"name": topic, "partitions": [
            {"partition_index": 0, "current_leader_epoch": epoch, "timestamp": timestamp}
        ]}],
    }  # fmt: skip
    (p,) = broker.call(LIST_OFFSETS, version, body)["topics"][0]["partitions"]
    return p


def txn_records(
    producer_id: int, *values: bytes, epoch: int = 0, sequence: int = 0, timestamp: int = 1_000
) -> bytes:
    """A transactional batch of `values` from `producer_id` (as a transactional producer
    writes it after AddPartitionsToTxn)."""
    return build_batch(
        [(None, v, timestamp + i, []) for i, v in enumerate(values)],
        producer_id=producer_id, producer_epoch=epoch, base_sequence=sequence,
        transactional=True,
    )  # fmt: skip


def marker_body(
    producer_id: int, topic: str, commit: bool, partitions=(0,), epoch: int = 0,
    coordinator_epoch: int = 0,
) -> dict:  # fmt: skip
    return {"markers": [{
        "producer_id": producer_id, "producer_epoch": epoch, "transaction_result": commit,
        "topics": [{"name": topic, "partition_indexes": list(partitions)}],
        "coordinator_epoch": coordinator_epoch,
    }]}  # fmt: skip


def write_marker(broker, producer_id: int, topic: str, commit: bool, **kw) -> list[int]:
    """The error code of each partition's marker (answered at once on one broker)."""
    answer = broker.call(WRITE_TXN_MARKERS, 1, marker_body(producer_id, topic, commit, **kw))
    return [p["error_code"] for p in answer["markers"][0]["topics"][0]["partitions"]]


class Wire:
    """A connection to a broker process with the in-process broker's `call`, so the
    helpers above work against real brokers (`bootstrap` is "host:port")."""

    def __init__(self, bootstrap: str) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.conn = BrokerConnection(host, int(port))

    def call(self, api_key: int, version: int, body: dict) -> dict:
        return self.conn.request(api_key, body, version)

    def close(self) -> None:
        self.conn.close()
