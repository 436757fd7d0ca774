"""The replication throttle's parts: which replicas a topic throttles, and the rate over
Kafka's windows, on a hand clock."""

from __future__ import annotations

import pytest

from broker.config.definition import ConfigError
from broker.log.config import LogConfig
from broker.server.replication_quota import (
    FOLLOWER_REPLICAS,
    UNLIMITED,
    ReplicationQuota,
    is_throttled,
)
from broker.server.topic_config import TopicConfigs


def test_which_replicas_are_throttled():
    configs = TopicConfigs(
        LogConfig(), {"t": {FOLLOWER_REPLICAS: "0:1, 1:2"}, "all": {FOLLOWER_REPLICAS: "*"}}
    )
    listed = configs.throttled_replicas("t", FOLLOWER_REPLICAS)
    assert is_throttled(listed, 0, 1) and is_throttled(listed, 1, 2)
    assert not is_throttled(listed, 0, 2) and not is_throttled(listed, 2, 1)
    assert is_throttled(configs.throttled_replicas("all", FOLLOWER_REPLICAS), 7, 9)
    assert configs.throttled_replicas("other", FOLLOWER_REPLICAS) == []
    with pytest.raises(ConfigError, match="PARTITION:BROKER"):
        configs.set("bad", {FOLLOWER_REPLICAS: "0-1"})


def test_the_rate_over_the_windows():
    now = [100.0]
    rate = [1000]
    quota = ReplicationQuota(lambda: rate[0], clock=lambda: now[0])
    assert not quota.exceeded()
    quota.record(900)
    assert not quota.exceeded()  # 900 B in the first second
    quota.record(200)
    assert quota.exceeded()  # 1100 B/s
    now[0] = 101.5
    assert not quota.exceeded()  # 1100 B over 1.5 s
    rate[0] = 500  # a dynamic change takes effect at once
    assert quota.exceeded()
    now[0] = 112.0  # the samples left the 11 windows
    assert not quota.exceeded()
    rate[0] = UNLIMITED
    quota.record(10**12)
    assert not quota.exceeded()


def test_a_leader_holds_back_a_throttled_follower_over_its_rate(broker):
    """A follower (replica 5, out of the ISR) of a throttled replica gets records until
    the leader's rate is used up, then none; consumers are never throttled."""
    from broker.protocol.apis import FETCH
    from broker.server.dynamic_config import DEFAULT_BROKER
    from broker.server.replication_quota import LEADER_RATE, LEADER_REPLICAS
    from tests.helpers.server_requests import create, fetch, fetch_body, produce, values

    create(broker, "t")
    for i in range(4):
        produce(broker, "t", values(b"x" * 2000, timestamp=1_000 + i))
    configs = broker.state.configs
    configs.apply_broker(DEFAULT_BROKER, {LEADER_RATE: "1000"})
    configs.apply_topic("t", {LEADER_REPLICAS: "0:0"})

    def follower_fetch(offset):
        body = {**fetch_body("t", offset, max_bytes=2500), "replica_id": 5}
        (p,) = broker.call(FETCH, 11, body)["responses"][0]["partitions"]
        return p

    first = follower_fetch(0)
    assert first["records"]  # under the rate: served
    held = follower_fetch(1)
    assert held["error_code"] == 0 and not held["records"]  # over it: nothing this time
    assert fetch(broker, "t", 1)["records"]  # a consumer is not a replica: not throttled
    configs.apply_topic("t", {})  # the throttle removed
    assert follower_fetch(1)["records"]
