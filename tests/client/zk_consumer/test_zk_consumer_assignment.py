"""The ZooKeeper consumer's pure parts: the seeds' range assignment, the znodes' bytes
(Kafka 0.8's layout) and its configuration errors."""

from __future__ import annotations

import json

import pytest

from broker.client.zk_consumer.assignment import assign, range_assignment, thread_ids
from broker.client.zk_consumer.config import parse_config
from broker.config.definition import ConfigError
from broker.zk import layout as z


def test_fewer_partitions_than_consumers_leaves_the_last_ones_idle():
    assert range_assignment([1, 0], ["c", "a", "b"]) == {"a": [0], "b": [1], "c": []}


def test_as_many_partitions_as_consumers_gives_one_each():
    assert range_assignment(range(3), ["c", "b", "a"]) == {"a": [0], "b": [1], "c": [2]}


def test_the_first_p_mod_c_consumers_take_one_more():
    # 8 partitions, 3 consumers: 8 div 3 = 2 each, the first 8 mod 3 = 2 take a third.
    assert range_assignment(range(8), ["x", "y", "z"]) == {
        "x": [0, 1, 2],
        "y": [3, 4, 5],
        "z": [6, 7],
    }
    # Contiguous ranges of the sorted partitions, whatever order they come in.
    shares = range_assignment([9, 3, 7, 1, 5], ["b", "a"])
    assert shares == {"a": [1, 3, 5], "b": [7, 9]}


def test_consumers_sort_as_strings_as_kafka_sorts_them():
    assert range_assignment(range(2), ["g_c9-0", "g_c10-0"]) == {"g_c10-0": [0], "g_c9-0": [1]}


def test_no_consumers_no_assignment():
    assert range_assignment(range(4), []) == {}


def test_every_partition_goes_to_exactly_one_thread():
    for partitions in range(0, 13):
        for consumers in range(1, 6):
            shares = range_assignment(range(partitions), [f"c{i}" for i in range(consumers)])
            taken = [p for share in shares.values() for p in share]
            assert sorted(taken) == list(range(partitions))
            sizes = sorted(len(s) for s in shares.values())
            assert sizes[-1] - sizes[0] <= 1


def test_group_assignment_per_topic_over_the_threads_subscribed_to_it():
    subscriptions = {"g_a": {"t1": 1, "t2": 1}, "g_b": {"t1": 2}}
    got = assign({"t1": range(5), "t2": [0, 1], "t3": [0]}, subscriptions)
    assert thread_ids("g_b", 2) == ["g_b-0", "g_b-1"]
    assert got == {
        "g_a-0": [("t1", 0), ("t1", 1), ("t2", 0), ("t2", 1)],
        "g_b-0": [("t1", 2), ("t1", 3)],
        "g_b-1": [("t1", 4)],
    }
    # A subscribed topic that does not exist yet has no owner.
    assert assign({}, {"g_a": {"t9": 1}}) == {"g_a-0": []}


def test_the_group_znodes_are_kafka_08s():
    assert z.consumer_id_path("g", "g_h-1-abc") == "/consumers/g/ids/g_h-1-abc"
    assert z.consumer_owner_path("g", "t", 3) == "/consumers/g/owners/t/3"
    assert z.consumer_offset_path("g", "t", 3) == "/consumers/g/offsets/t/3"
    data = z.encode_consumer_registration(z.ConsumerRegistration({"t": 1}, 1700000000000))
    assert json.loads(data) == {
        "version": 1,
        "subscription": {"t": 1},
        "pattern": "static",
        "timestamp": "1700000000000",
    }
    assert z.decode_consumer_registration("c", data) == z.ConsumerRegistration(
        {"t": 1}, 1700000000000
    )
    assert z.encode_consumer_offset(42) == b"42"
    assert z.decode_consumer_offset(b"42") == 42
    with pytest.raises(z.ZkDataError, match="not a number"):
        z.decode_consumer_offset(b"forty")
    with pytest.raises(z.ZkDataError, match="subscription"):
        z.decode_consumer_registration("c", b'{"version":1}')


def test_configuration_errors_name_key_and_value():
    base = {"zookeeper.connect": "127.0.0.1:2181", "group.id": "g"}
    values = parse_config({**base, "auto.commit.enable": False, "rebalance.max.retries": 7})
    assert values["auto.commit.enable"] is False and values["rebalance.max.retries"] == 7
    assert values["auto.offset.reset"] == "largest" and values["consumer.id"] is None
    with pytest.raises(ConfigError, match="auto.offset.reset") as bad:
        parse_config({**base, "auto.offset.reset": "earliest"})
    assert "earliest" in str(bad.value)
    with pytest.raises(ConfigError, match="group.id"):
        parse_config({**base, "group.id": "a/b"})
    with pytest.raises(ConfigError, match="Missing required configuration group.id"):
        parse_config({"zookeeper.connect": "127.0.0.1:2181"})
    with pytest.raises(ConfigError, match="Unknown configuration 'groupid'"):
        parse_config({**base, "groupid": "x"})
