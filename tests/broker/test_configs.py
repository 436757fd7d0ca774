"""Topic and broker configs on a single broker (no ZooKeeper), through the same client
calls as in a cluster (tests/helpers/configs.py): applied at once, kept over a restart."""

from __future__ import annotations

from confluent_kafka.admin import ConfigSource, ResourceType

from tests.helpers.cluster import wait_for
from tests.helpers.configs import (
    QUICK_RETENTION,
    RETAINED_BYTES,
    create,
    describe,
    fill,
    segments,
    set_broker_default,
    topic_config_changes_through_both_clients,
    trimmed,
)


def test_topic_configs_through_both_clients(broker_factory):
    b = broker_factory(QUICK_RETENTION)
    topic_config_changes_through_both_clients(b.bootstrap, "configs", [b.log_dir], [b.bootstrap])


def test_dynamic_broker_default_applies_at_once_and_survives_a_restart(broker_factory, tmp_path):
    b = broker_factory(QUICK_RETENTION, log_dir=tmp_path / "logs")
    create(b.bootstrap, "plain", 1, {"segment.bytes": "1024"})
    fill(b.bootstrap, "plain")
    assert (
        set_broker_default(b.bootstrap, "log.retention.bytes", str(RETAINED_BYTES))["error_code"]
        == 0
    )
    wait_for(lambda: trimmed([b.log_dir], "plain"), "old segments deleted")
    found = describe(b.bootstrap, ResourceType.BROKER, "0")["log.retention.bytes"]
    assert (found.value, found.source) == (
        str(RETAINED_BYTES),
        ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value,
    )
    refused = set_broker_default(b.bootstrap, "num.partitions", "7")
    assert refused["error_code"] == 42  # INVALID_REQUEST
    assert refused["error_message"] == "Cannot update these configs dynamically: num.partitions"
    b.stop()
    again = broker_factory(QUICK_RETENTION, log_dir=tmp_path / "logs", port=b.port)
    found = describe(again.bootstrap, ResourceType.TOPIC, "plain")["retention.bytes"]
    assert (found.value, found.source) == (
        str(RETAINED_BYTES),
        ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value,
    )
    assert segments(again.log_dir, "plain")[0].name != "00000000000000000000.log"
