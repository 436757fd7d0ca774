"""Config changes through unmodified clients, the same calls for a single broker and a
cluster: confluent-kafka's and kafka-python's admin clients, and what their effect on the
replicas' log files looks like (retention deleting old segments)."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
    ResourceType,
)
from kafka import KafkaProducer
from kafka.admin import ConfigResource as KConfigResource
from kafka.admin import ConfigResourceType as KType
from kafka.admin import KafkaAdminClient

from broker.client.connection import BrokerConnection
from broker.protocol.apis import DESCRIBE_CONFIGS, INCREMENTAL_ALTER_CONFIGS
from tests.helpers.cluster import wait_for

SEGMENT_BYTES = 1024  # the smallest segment.bytes: many segments from few records
RETAINED_BYTES = 3000
DYNAMIC_TOPIC, DEFAULT = ConfigSource.DYNAMIC_TOPIC_CONFIG.value, ConfigSource.DEFAULT_CONFIG.value
# Broker keys that make retention and deleted files visible quickly.
QUICK_RETENTION = {"log.retention.check.interval.ms": "200", "log.segment.delete.delay.ms": "0"}


def segments(log_dir: Path, topic: str, partition: int = 0) -> list[Path]:
    return sorted((Path(log_dir) / f"{topic}-{partition}").glob("*.log"))


def fill(bootstrap: str, topic: str, records: int = 60) -> None:
    """Records of 200 bytes, one batch each, acknowledged by every in-sync replica."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=0)
    for i in range(records):
        producer.send(topic, value=b"%05d" % i * 40, partition=0).get(timeout=30)
    producer.close()


def trimmed(log_dirs: list[Path], topic: str) -> bool:
    """Every replica deleted its oldest segments down to about RETAINED_BYTES."""
    for log_dir in log_dirs:
        found = segments(log_dir, topic)
        if not found or found[0].name == "00000000000000000000.log":
            return False
        if sum(_size(p) for p in found) > RETAINED_BYTES + 2 * SEGMENT_BYTES:
            return False
    return True


def _size(segment: Path) -> int:
    # The broker may delete a segment between the listing and this look at it.
    try:
        return segment.stat().st_size
    except FileNotFoundError:
        return 0


def create(bootstrap: str, topic: str, replicas: int, config: dict[str, str]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, replicas, config=config)])[topic].result(30)


def describe(bootstrap: str, kind: ResourceType, name: str) -> dict[str, ConfigEntry]:
    """confluent-kafka's DescribeConfigs of one resource."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(kind, name)
    return admin.describe_configs([resource])[resource].result(30)


def incremental(bootstrap: str, kind: ResourceType, name: str, *ops) -> None:
    """confluent-kafka's IncrementalAlterConfigs: ops are (key, AlterConfigOpType, value)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(
        kind,
        name,
        incremental_configs=[
            ConfigEntry(key, value, incremental_operation=op) for key, op, value in ops
        ],
    )
    admin.incremental_alter_configs([resource])[resource].result(30)


def kafka_python_admin(bootstrap: str) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=30000)


def _request(address: str, api_key: int, body: dict) -> dict:
    """One request to the broker at `address` (host:port), through our client library."""
    host, port = address.rsplit(":", 1)
    connection = BrokerConnection(host, int(port))
    try:
        return connection.request(api_key, body)
    finally:
        connection.close()


def configs_at(address: str, kind: int, name: str) -> dict[str, tuple[str | None, int]]:
    """key -> (value, source) as the broker at `address` itself describes the resource
    (the admin clients pick a broker of their own for topics)."""
    body = {
        "resources": [{"resource_type": kind, "resource_name": name, "configuration_keys": None}],
        "include_synonyms": False,
    }
    (result,) = _request(address, DESCRIBE_CONFIGS, body)["results"]
    assert result["error_code"] == 0, result
    return {c["name"]: (c["value"], c["config_source"]) for c in result["configs"]}


def everywhere(addresses: list[str], kind: int, name: str, expected: dict) -> bool:
    """Every broker describes the resource's keys in `expected` as (value, source)."""
    for address in addresses:
        found = configs_at(address, kind, name)
        if any(found.get(key) != want for key, want in expected.items()):
            return False
    return True


def set_broker_default(bootstrap: str, key: str, value: str | None) -> dict:
    """IncrementalAlterConfigs of the cluster-wide broker default (the empty broker name,
    as Kafka's `kafka-configs --entity-default` sends it; neither Python client can name
    it), through our client library; `value` None deletes the key."""
    op = 0 if value is not None else 1
    body = {
        "resources": [
            {
                "resource_type": 4,
                "resource_name": "",
                "configs": [{"name": key, "config_operation": op, "value": value}],
            }
        ],
        "validate_only": False,
    }
    (answer,) = _request(bootstrap.split(",")[0], INCREMENTAL_ALTER_CONFIGS, body)["responses"]
    return answer


def topic_config_changes_through_both_clients(
    bootstrap: str, topic: str, replica_log_dirs: list[Path], addresses: list[str]
) -> None:
    """The calls an operator makes about a topic, checked on every replica's files and on
    every broker (`addresses`): the topic has many small segments; a smaller
    retention.bytes set through kafka-python deletes the old ones on each replica, without
    a restart; both clients describe what is in force and where it comes from;
    AlterConfigs (whole set) keeps what kafka-python carries over; IncrementalAlterConfigs
    appends to and removes from a list key; bad input is refused with nothing changed.

    Each broker applies a change when its notification reaches it, so what a broker
    describes right after a change made on another is waited for, as a client would."""
    create(bootstrap, topic, len(replica_log_dirs), {"segment.bytes": str(SEGMENT_BYTES)})
    fill(bootstrap, topic)
    assert all(len(segments(d, topic)) >= 8 for d in replica_log_dirs)
    found = describe(bootstrap, ResourceType.TOPIC, topic)
    assert found["segment.bytes"].value == str(SEGMENT_BYTES)
    assert found["segment.bytes"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert found["retention.bytes"].value == "-1"
    assert found["retention.bytes"].source == ConfigSource.DEFAULT_CONFIG.value

    def applied(**expected) -> None:
        expected = {k.replace("_", "."): v for k, v in expected.items()}
        wait_for(lambda: everywhere(addresses, 2, topic, expected), f"{expected} everywhere")

    admin = kafka_python_admin(bootstrap)
    try:
        # kafka-python picks IncrementalAlterConfigs (the broker advertises it)
        resource = KConfigResource(KType.TOPIC, topic, {"retention.bytes": str(RETAINED_BYTES)})
        assert admin.alter_configs([resource]) == {"topic": {topic: "OK"}}
        wait_for(lambda: trimmed(replica_log_dirs, topic), "old segments deleted on every replica")
        applied(retention_bytes=(str(RETAINED_BYTES), DYNAMIC_TOPIC))
        modified = admin.describe_configs([KConfigResource(KType.TOPIC, topic)])["topic"][topic]
        assert {k: (v["value"], v["config_source"]) for k, v in modified.items()} == {
            "segment.bytes": (str(SEGMENT_BYTES), "DYNAMIC_TOPIC_CONFIG"),
            "retention.bytes": (str(RETAINED_BYTES), "DYNAMIC_TOPIC_CONFIG"),
        }
        # AlterConfigs replaces the whole set; kafka-python carries the others over
        resource = KConfigResource(KType.TOPIC, topic, {"retention.ms": "86400000"})
        assert admin.alter_configs([resource], incremental=False) == {"topic": {topic: "OK"}}
        applied(retention_ms=("86400000", DYNAMIC_TOPIC))
        # bad input: refused with the key and value named, nothing changed
        bad = KConfigResource(KType.TOPIC, topic, {"retention.ms": "1", "segment.bytes": "12"})
        answer = admin.alter_configs([bad])["topic"][topic]
        assert "InvalidRequest" in answer and "segment.bytes" in answer and "'12'" in answer
        unknown = KConfigResource(KType.TOPIC, topic, {"retention.ms": "1", "no.such.key": "1"})
        answer = admin.alter_configs([unknown], raise_on_unknown=False)["topic"][topic]
        assert "InvalidConfiguration" in answer and "no.such.key" in answer
    finally:
        admin.close()
    applied(
        segment_bytes=(str(SEGMENT_BYTES), DYNAMIC_TOPIC),
        retention_bytes=(str(RETAINED_BYTES), DYNAMIC_TOPIC),
        retention_ms=("86400000", DYNAMIC_TOPIC),
    )

    append = ("cleanup.policy", AlterConfigOpType.APPEND, "compact")
    incremental(bootstrap, ResourceType.TOPIC, topic, append)
    applied(
        cleanup_policy=("delete,compact", DYNAMIC_TOPIC), retention_ms=("86400000", DYNAMIC_TOPIC)
    )
    found = describe(bootstrap, ResourceType.TOPIC, topic)
    assert found["cleanup.policy"].value == "delete,compact"
    assert found["cleanup.policy"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    with pytest.raises(KafkaException, match="cleanup.policy"):  # none left: refused
        subtract = ("cleanup.policy", AlterConfigOpType.SUBTRACT, "delete,compact")
        incremental(bootstrap, ResourceType.TOPIC, topic, subtract)
    delete = ("cleanup.policy", AlterConfigOpType.DELETE, None)
    incremental(bootstrap, ResourceType.TOPIC, topic, delete)
    applied(cleanup_policy=("delete", DEFAULT), retention_ms=("86400000", DYNAMIC_TOPIC))
