"""DescribeConfigs, AlterConfigs and IncrementalAlterConfigs on a single broker, in process:
values in force and their sources, whole-set and incremental changes applied to the logs
at once, stored for the next start, bad input refused with nothing changed."""

from __future__ import annotations

import json

import pytest

from broker.protocol.apis import ALTER_CONFIGS, DESCRIBE_CONFIGS, INCREMENTAL_ALTER_CONFIGS
from broker.protocol.errors import ErrorCode as E
from broker.server.modes.local import BROKER_CONFIGS_FILE, TOPIC_CONFIGS_FILE
from broker.util.clock import HOUR_MS
from tests.helpers.inprocess_broker import InProcessBroker
from tests.helpers.server_requests import create, produce, values

TOPIC, BROKER, BROKER_LOGGER = 2, 4, 8
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def describe(broker, kind, name, keys=None, version=4, synonyms=True):
    body = {
        "resources": [{"resource_type": kind, "resource_name": name, "configuration_keys": keys}],
        "include_synonyms": synonyms,
        "include_documentation": True,
    }
    (result,) = broker.call(DESCRIBE_CONFIGS, version, body)["results"]
    return result


def entries(broker, kind, name, keys=None, **kw) -> dict[str, dict]:
    result = describe(broker, kind, name, keys, **kw)
    assert result["error_code"] == 0, result
    return {c["name"]: c for c in result["configs"]}


def alter(broker, kind, name, configs: dict, validate_only=False, version=2):
    body = {
        "resources": [
            {
                "resource_type": kind,
                "resource_name": name,
                "configs": [{"name": k, "value": v} for k, v in configs.items()],
            }
        ],
        "validate_only": validate_only,
    }
    (r,) = broker.call(ALTER_CONFIGS, version, body)["responses"]
    return r["error_code"], r["error_message"]


def incremental(broker, kind, name, ops: list, validate_only=False, version=1):
    body = {
        "resources": [
            {
                "resource_type": kind,
                "resource_name": name,
                "configs": [{"name": k, "config_operation": op, "value": v} for k, op, v in ops],
            }
        ],
        "validate_only": validate_only,
    }
    (r,) = broker.call(INCREMENTAL_ALTER_CONFIGS, version, body)["responses"]
    return r["error_code"], r["error_message"]


def log_config(broker, topic):
    return broker.state.replicas.get(topic, 0).log.config


@pytest.fixture
def static_broker(tmp_path):
    b = InProcessBroker(tmp_path / "logs", **{"log.retention.hours": "24"})
    yield b
    b.close()


def test_topic_keys_with_value_source_and_synonyms(static_broker):
    broker = static_broker
    create(broker, "t", configs={"segment.bytes": "2048"})
    found = entries(broker, TOPIC, "t")
    assert set(found) >= {"retention.ms", "segment.bytes", "cleanup.policy", "max.message.bytes"}
    segment = found["segment.bytes"]
    assert (segment["value"], segment["config_source"], segment["read_only"]) == ("2048", 1, False)
    assert [(s["name"], s["value"], s["source"]) for s in segment["synonyms"]] == [
        ("segment.bytes", "2048", 1),
        ("log.segment.bytes", "1073741824", 5),
    ]
    retention = found["retention.ms"]
    # server.properties' log.retention.hours=24 is in force: a static broker config
    assert (retention["value"], retention["config_source"]) == (str(24 * HOUR_MS), 4)
    assert [(s["name"], s["source"]) for s in retention["synonyms"]] == [
        ("log.retention.hours", 4),
        ("log.retention.hours", 5),
    ]
    assert found["cleanup.policy"]["value"] == "delete"
    assert found["cleanup.policy"]["config_type"] == 7  # LIST
    assert found["retention.ms"]["config_type"] == 5  # LONG
    assert found["retention.ms"]["documentation"]
    # v0: is_default instead of a source; keys filter
    v0 = entries(broker, TOPIC, "t", keys=["segment.bytes", "retention.bytes"], version=0)
    assert {n: c["is_default"] for n, c in v0.items()} == {
        "segment.bytes": False,
        "retention.bytes": True,
    }


def test_describe_errors_per_resource(broker):
    create(broker, "t")
    body = {
        "resources": [
            {"resource_type": TOPIC, "resource_name": "nope", "configuration_keys": None},
            {"resource_type": TOPIC, "resource_name": "bad name!", "configuration_keys": None},
            {"resource_type": BROKER, "resource_name": "7", "configuration_keys": None},
            {"resource_type": BROKER, "resource_name": "x", "configuration_keys": None},
            {"resource_type": BROKER_LOGGER, "resource_name": "0", "configuration_keys": None},
            {"resource_type": TOPIC, "resource_name": "t", "configuration_keys": ["flush.ms"]},
        ],
        "include_synonyms": False,
    }
    results = broker.call(DESCRIBE_CONFIGS, 1, body)["results"]
    assert [r["error_code"] for r in results] == [
        E.UNKNOWN_TOPIC_OR_PARTITION,
        E.INVALID_TOPIC_EXCEPTION,
        E.INVALID_REQUEST,
        E.INVALID_REQUEST,
        E.INVALID_REQUEST,
        E.NONE,
    ]
    assert "expected 0 or empty string" in results[2]["error_message"]
    assert [c["name"] for c in results[5]["configs"]] == ["flush.ms"]
    assert results[5]["configs"][0]["synonyms"] == []  # not asked for


def test_broker_keys_read_only_unless_dynamic(static_broker):
    found = entries(static_broker, BROKER, "0")
    assert found["log.retention.hours"]["value"] == "24"
    assert found["log.retention.hours"]["config_source"] == 4
    assert found["log.retention.hours"]["read_only"] is False
    assert found["broker.id"]["read_only"] is True
    assert found["num.partitions"]["config_source"] == 5
    assert found["log.retention.ms"]["value"] is None  # unset: falls back to its synonyms
    assert [(s["name"], s["value"]) for s in found["log.retention.ms"]["synonyms"]] == [
        ("log.retention.hours", "24"),
        ("log.retention.hours", "168"),
    ]
    assert entries(static_broker, BROKER, "") == {}  # no cluster-wide dynamic default yet


def test_alter_configs_replaces_the_whole_set_and_applies_at_once(broker):
    create(broker, "t", configs={"retention.bytes": "1000000"})
    assert alter(broker, TOPIC, "t", {"segment.bytes": "4096", "retention.ms": "60000"}) == (
        0,
        None,
    )
    config = log_config(broker, "t")
    assert (config.segment_bytes, config.retention_ms, config.retention_bytes) == (
        4096,
        60000,
        -1,  # not in the new set: back to the broker's
    )
    stored = json.loads((broker.state.config.log_dirs[0] / TOPIC_CONFIGS_FILE).read_text())
    assert stored["t"] == {"segment.bytes": "4096", "retention.ms": "60000"}
    found = entries(broker, TOPIC, "t")
    assert found["retention.bytes"]["config_source"] == 5
    assert found["retention.ms"]["config_source"] == 1
    # a null value leaves the key out
    assert alter(broker, TOPIC, "t", {"segment.bytes": None})[0] == 0
    assert broker.state.configs.overrides(2, "t") == {}


def test_incremental_operations(broker):
    create(broker, "t")
    ops = [("cleanup.policy", APPEND, "compact"), ("retention.ms", SET, "1000")]
    assert incremental(broker, TOPIC, "t", ops) == (0, None)
    assert log_config(broker, "t").cleanup_policy == ("delete", "compact")
    assert incremental(broker, TOPIC, "t", [("cleanup.policy", SUBTRACT, "delete")])[0] == 0
    assert log_config(broker, "t").cleanup_policy == ("compact",)
    assert incremental(broker, TOPIC, "t", [("retention.ms", DELETE, None)])[0] == 0
    assert broker.state.configs.overrides(2, "t") == {"cleanup.policy": "compact"}
    assert log_config(broker, "t").retention_ms == 168 * HOUR_MS
    # the last policy may not go: refused, nothing changed
    code, message = incremental(broker, TOPIC, "t", [("cleanup.policy", SUBTRACT, "compact")])
    assert code == E.INVALID_REQUEST and "cleanup.policy" in message
    code, message = incremental(broker, TOPIC, "t", [("retention.ms", APPEND, "5")])
    assert code == E.INVALID_CONFIG and "retention.ms" in message
    assert broker.state.configs.overrides(2, "t") == {"cleanup.policy": "compact"}


def test_validate_only_changes_nothing(broker):
    create(broker, "t")
    assert alter(broker, TOPIC, "t", {"retention.ms": "1"}, validate_only=True) == (0, None)
    assert incremental(broker, TOPIC, "t", [("segment.ms", SET, "5")], validate_only=True)[0] == 0
    assert broker.state.configs.overrides(2, "t") == {}
    assert log_config(broker, "t").retention_ms == 168 * HOUR_MS
    code, _ = alter(broker, TOPIC, "t", {"retention.ms": "x"}, validate_only=True)
    assert code == E.INVALID_REQUEST


def test_bad_values_refused_naming_key_and_value_nothing_changed(broker):
    create(broker, "t", configs={"retention.ms": "5000"})
    code, message = alter(broker, TOPIC, "t", {"retention.ms": "1000", "segment.bytes": "12"})
    assert code == E.INVALID_REQUEST
    assert "segment.bytes" in message and "'12'" in message
    code, message = alter(broker, TOPIC, "t", {"retention.ms": "1000", "no.such.key": "1"})
    assert code == E.INVALID_CONFIG and "no.such.key" in message
    code, message = incremental(
        broker, TOPIC, "t", [("retention.ms", SET, "1"), ("retention.ms", DELETE, None)]
    )
    assert code == E.INVALID_REQUEST and "duplicate" in message
    assert alter(broker, TOPIC, "nope", {"retention.ms": "1"})[0] == E.UNKNOWN_TOPIC_OR_PARTITION
    assert broker.state.configs.overrides(2, "t") == {"retention.ms": "5000"}
    assert log_config(broker, "t").retention_ms == 5000


def test_dynamic_broker_configs_reach_every_log(tmp_path):
    broker = InProcessBroker(tmp_path / "logs")
    try:
        create(broker, "plain")
        create(broker, "own", configs={"retention.ms": "1234"})
        code, message = incremental(broker, BROKER, "", [("log.retention.ms", SET, "60000")])
        assert (code, message) == (0, None)
        assert log_config(broker, "plain").retention_ms == 60000
        assert log_config(broker, "own").retention_ms == 1234  # its own override wins
        found = entries(broker, TOPIC, "plain")["retention.ms"]
        assert (found["value"], found["config_source"]) == ("60000", 3)
        # this broker's own dynamic config beats the cluster-wide one
        assert alter(broker, BROKER, "0", {"log.retention.ms": "30000"})[0] == 0
        assert log_config(broker, "plain").retention_ms == 30000
        assert entries(broker, BROKER, "")["log.retention.ms"]["value"] == "60000"
        own = entries(broker, BROKER, "0")["log.retention.ms"]
        assert (own["value"], own["config_source"]) == ("30000", 2)
        # a key that needs a restart, a bad value, another broker: refused, nothing changed
        code, message = alter(broker, BROKER, "0", {"log.retention.ms": "1", "num.partitions": "3"})
        assert code == E.INVALID_REQUEST
        assert message == "Cannot update these configs dynamically: num.partitions"
        code, message = incremental(broker, BROKER, "", [("message.max.bytes", SET, "-5")])
        assert code == E.INVALID_REQUEST and "message.max.bytes" in message
        assert alter(broker, BROKER, "3", {"log.retention.ms": "1"})[0] == E.INVALID_REQUEST
        assert log_config(broker, "plain").retention_ms == 30000
        stored = json.loads((tmp_path / "logs" / BROKER_CONFIGS_FILE).read_text())
        assert stored == {
            "<default>": {"log.retention.ms": "60000"},
            "0": {"log.retention.ms": "30000"},
        }
        produce(broker, "plain", values(b"x"))  # the logs still take writes
    finally:
        broker.close()
    # a restart reads the stored configs before the logs open
    again = InProcessBroker(tmp_path / "logs")
    try:
        assert log_config(again, "plain").retention_ms == 30000
        assert log_config(again, "own").retention_ms == 1234
        assert entries(again, BROKER, "0")["log.retention.ms"]["config_source"] == 2
    finally:
        again.close()
