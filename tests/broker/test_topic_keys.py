"""Every topic key Kafka 3.x has, through confluent-kafka's AdminClient and our
kafka-topics / kafka-configs on one shared broker: accepted at CreateTopics, described
with its value and source, changed and deleted by IncrementalAlterConfigs; bad values
refused naming key and value; and what DescribeConfigs answers (topic and broker) can be
written back by AlterConfigs unchanged (docs/contracts/topic-configs.md)."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
    ResourceType,
)

from broker.server.topic_config import TOPIC_CONFIG
from broker.tools import configs as configs_tool
from broker.tools import topics as topics_tool
from tests.helpers.configs import describe

# A valid value of each key that is not its default (a key added to TOPIC_CONFIG needs one).
GOOD = {
    "retention.ms": "3600000",
    "retention.bytes": "1048576",
    "segment.bytes": "2097152",
    "segment.ms": "3600000",
    "max.message.bytes": "2000000",
    "flush.messages": "1000",
    "flush.ms": "5000",
    "message.timestamp.type": "LogAppendTime",
    "min.insync.replicas": "2",
    "unclean.leader.election.enable": "true",
    "cleanup.policy": "compact,delete",
    "delete.retention.ms": "1000",
    "min.cleanable.dirty.ratio": "0.25",
    "min.compaction.lag.ms": "100",
    "max.compaction.lag.ms": "600000",
    "segment.jitter.ms": "100",
    "segment.index.bytes": "4096",
    "index.interval.bytes": "1024",
    "preallocate": "true",
    "file.delete.delay.ms": "1000",
    "message.format.version": "2.8-IV1",
    "message.downconversion.enable": "false",
    "remote.storage.enable": "false",
    "local.retention.ms": "1000",
    "local.retention.bytes": "1000",
    "remote.log.copy.disable": "true",
    "remote.log.delete.on.disable": "true",
    "leader.replication.throttled.replicas": "0:0",
    "follower.replication.throttled.replicas": "*",
    "compression.type": "lz4",
    "compression.gzip.level": "6",
    "compression.lz4.level": "12",
    "compression.zstd.level": "5",
    "message.timestamp.difference.max.ms": "86400000",
    "message.timestamp.before.max.ms": "3600000",
    "message.timestamp.after.max.ms": "60000",
}
BAD = [
    ("max.compaction.lag.ms", "0"),
    ("segment.jitter.ms", "-1"),
    ("segment.index.bytes", "3"),
    ("index.interval.bytes", "-1"),
    ("preallocate", "maybe"),
    ("file.delete.delay.ms", "-5"),
    ("message.format.version", "0.7.0"),
    ("message.format.version", "3.42"),
    ("message.downconversion.enable", "sometimes"),
    ("remote.storage.enable", "true"),
    ("local.retention.ms", "-3"),
    ("local.retention.bytes", "x"),
    ("leader.replication.throttled.replicas", "0-0"),
    ("compression.type", "brotli"),
    ("compression.gzip.level", "10"),
    ("compression.zstd.level", "23"),
    ("message.timestamp.before.max.ms", "-1"),
]
TOPIC = ResourceType.TOPIC
# AlterConfigs (the whole set) is what the round trips are about, deprecated or not.
pytestmark = pytest.mark.filterwarnings("ignore:alter_configs has been deprecated")


def admin(broker) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def values(entries) -> dict[str, str | None]:
    return {name: entry.value for name, entry in entries.items()}


def refusal(future) -> KafkaError:
    with pytest.raises(KafkaException) as raised:
        future.result(30)
    return raised.value.args[0]


@pytest.mark.parametrize("key", sorted(TOPIC_CONFIG.keys))
def test_each_topic_key_is_created_described_changed_and_deleted(broker, key):
    topic = "k-" + key.replace(".", "-")
    client = admin(broker)
    client.create_topics([NewTopic(topic, 1, 1, config={key: GOOD[key]})])[topic].result(30)
    entry = describe(broker.bootstrap, TOPIC, topic)[key]
    assert (entry.value, entry.source) == (GOOD[key], ConfigSource.DYNAMIC_TOPIC_CONFIG.value)

    def incremental(op, value=None):
        entries = [ConfigEntry(key, value, incremental_operation=op)]
        resource = ConfigResource(TOPIC, topic, incremental_configs=entries)
        client.incremental_alter_configs([resource])[resource].result(30)

    incremental(AlterConfigOpType.DELETE)
    entry = describe(broker.bootstrap, TOPIC, topic)[key]
    assert entry.source != ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert entry.value is not None  # a default is described, never null
    incremental(AlterConfigOpType.SET, GOOD[key])
    assert describe(broker.bootstrap, TOPIC, topic)[key].value == GOOD[key]


@pytest.mark.parametrize("key, value", BAD)
def test_bad_values_are_refused_naming_key_and_value(broker, key, value):
    client = admin(broker)
    topic = f"bad-{BAD.index((key, value))}"
    error = refusal(client.create_topics([NewTopic(topic, 1, 1, config={key: value})])[topic])
    assert error.code() == KafkaError.INVALID_CONFIG
    assert key in error.str() and value in error.str()
    # The same value through IncrementalAlterConfigs on a topic that exists.
    if topic not in client.list_topics(timeout=30).topics:
        client.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    entries = [ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET)]
    resource = ConfigResource(TOPIC, topic, incremental_configs=entries)
    error = refusal(client.incremental_alter_configs([resource])[resource])
    # As a ZooKeeper-mode Kafka broker answers a value its ConfigDef refuses.
    assert error.code() == KafkaError.INVALID_REQUEST
    assert key in error.str() and value in error.str()


def test_min_compaction_lag_above_max_is_refused(broker):
    client = admin(broker)
    config = {"min.compaction.lag.ms": "2000", "max.compaction.lag.ms": "1000"}
    error = refusal(client.create_topics([NewTopic("lags", 1, 1, config=config)])["lags"])
    assert error.code() == KafkaError.INVALID_CONFIG
    assert "min.compaction.lag.ms (2000) > max.compaction.lag.ms (1000)" in error.str()


def test_described_topic_configs_write_back_unchanged(broker):
    client = admin(broker)
    client.create_topics(
        [NewTopic("roundtrip", 1, 1, config={"preallocate": "true", "segment.jitter.ms": "5"})]
    )["roundtrip"].result(30)
    before = describe(broker.bootstrap, TOPIC, "roundtrip")
    assert set(before) == set(TOPIC_CONFIG.keys)
    assert all(entry.value is not None for entry in before.values())
    assert before["flush.ms"].value == "9223372036854775807"  # Kafka's default: Long.MAX
    assert before["max.compaction.lag.ms"].value == "9223372036854775807"
    assert before["message.format.version"].value == "3.0-IV1"
    resource = ConfigResource(TOPIC, "roundtrip", set_config=values(before))
    client.alter_configs([resource])[resource].result(30)  # AlterConfigs: the whole set
    after = describe(broker.bootstrap, TOPIC, "roundtrip")
    assert values(after) == values(before)
    assert {e.source for e in after.values()} == {ConfigSource.DYNAMIC_TOPIC_CONFIG.value}


def test_described_dynamic_broker_configs_write_back_unchanged(broker):
    client = admin(broker)
    before = describe(broker.bootstrap, ResourceType.BROKER, "0")
    dynamic = {
        name: entry.value
        for name, entry in before.items()
        if not entry.is_read_only and not entry.is_sensitive and entry.value is not None
    }
    assert {"log.preallocate", "log.roll.jitter.hours", "log.segment.delete.delay.ms"} <= set(
        dynamic
    )
    assert {"log.cleaner.max.compaction.lag.ms", "log.index.size.max.bytes"} <= set(dynamic)
    assert before["log.message.format.version"].is_read_only  # static, as in Kafka
    resource = ConfigResource(ResourceType.BROKER, "0", set_config=dynamic)
    try:
        client.alter_configs([resource])[resource].result(30)
        after = describe(broker.bootstrap, ResourceType.BROKER, "0")
        assert values(after) == values(before)
        assert after["log.preallocate"].source == ConfigSource.DYNAMIC_BROKER_CONFIG.value
    finally:
        empty = ConfigResource(ResourceType.BROKER, "0", set_config={})
        client.alter_configs([empty])[empty].result(30)


def test_kafka_topics_and_kafka_configs_take_the_new_keys(broker, capsys):
    server = ["--bootstrap-server", broker.bootstrap]
    create = ["--create", "--topic", "tooled", "--partitions", "1", "--replication-factor", "1"]
    settings = ["segment.index.bytes=8192", "preallocate=true", "max.compaction.lag.ms=60000"]
    create += [arg for s in settings for arg in ("--config", s)]
    assert topics_tool.main(server + create) == 0
    alter = ["--entity-type", "topics", "--entity-name", "tooled", "--alter"]
    alter += ["--add-config", "segment.jitter.ms=7,message.downconversion.enable=false"]
    alter += ["--delete-config", "preallocate"]
    assert configs_tool.main(server + alter) == 0
    found = values(describe(broker.bootstrap, TOPIC, "tooled"))
    assert found["segment.index.bytes"] == "8192"
    assert found["max.compaction.lag.ms"] == "60000"
    assert found["segment.jitter.ms"] == "7"
    assert found["message.downconversion.enable"] == "false"
    assert found["preallocate"] == "false"
    bad = ["--entity-type", "topics", "--entity-name", "tooled", "--alter"]
    assert configs_tool.main(server + bad + ["--add-config", "segment.jitter.ms=-4"]) == 1
    out = capsys.readouterr()
    assert "segment.jitter.ms" in out.out + out.err and "-4" in out.out + out.err
