"""The JSON at each ZooKeeper path, as Kafka 2.x writes and reads it."""

from __future__ import annotations

import json

import pytest

from broker.cluster import BrokerRegistration, Endpoint, LeaderAndIsr
from broker.zk import layout as z


def test_broker_registration_round_trip_and_kafka_fields():
    reg = BrokerRegistration(
        3,
        (Endpoint("INTERNAL", "10.0.0.3", 9093, "SSL"), Endpoint("PLAINTEXT", "host3", 9092)),
        rack="r1",
        timestamp_ms=1234,
    )
    data = z.encode_broker(reg)
    fields = json.loads(data)
    assert fields["version"] == 4 and fields["rack"] == "r1" and fields["jmx_port"] == -1
    assert fields["endpoints"] == ["INTERNAL://10.0.0.3:9093", "PLAINTEXT://host3:9092"]
    assert (fields["host"], fields["port"], fields["timestamp"]) == ("host3", 9092, "1234")
    back = z.decode_broker(3, data, epoch=77)
    assert back == BrokerRegistration(3, reg.endpoints, "r1", 1234, 77)
    assert back.endpoint("INTERNAL").port == 9093 and back.endpoint("SSL") is None


def test_broker_registration_written_by_kafka_is_read():
    kafka = (
        b'{"features":{},"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT",'
        b'"SSL":"SSL"},"endpoints":["PLAINTEXT://[::1]:9092","SSL://b1:9093"],"jmx_port":-1,'
        b'"port":9092,"host":"::1","version":5,"timestamp":"1700000000000"}'
    )
    reg = z.decode_broker(1, kafka)
    assert [(e.listener, e.host, e.port, e.security_protocol) for e in reg.endpoints] == [
        ("PLAINTEXT", "::1", 9092, "PLAINTEXT"),
        ("SSL", "b1", 9093, "SSL"),
    ]
    assert reg.rack is None
    old = z.decode_broker(2, b'{"version":1,"host":"h","port":9092,"jmx_port":-1}')
    assert old.endpoints == (Endpoint("PLAINTEXT", "h", 9092),)


def test_assignment_and_partition_state():
    data = z.encode_assignment({1: [2, 3], 0: [1, 2]})
    assert json.loads(data) == {"version": 1, "partitions": {"0": [1, 2], "1": [2, 3]}}
    assert z.decode_assignment("t", data) == {0: [1, 2], 1: [2, 3]}
    state = LeaderAndIsr(2, 5, (2, 3), 7)
    raw = json.loads(z.encode_partition_state(state))
    assert raw == {"controller_epoch": 7, "leader": 2, "version": 1, "leader_epoch": 5,
                   "isr": [2, 3]}  # fmt: skip
    back = z.decode_partition_state(z.encode_partition_state(state), zk_version=4)
    assert back == state and back.zk_version == 4


def test_controller_epoch_config_and_notifications():
    assert z.decode_controller(z.encode_controller(2, 99)) == 2
    assert z.decode_controller_epoch(z.encode_controller_epoch(12)) == 12
    assert z.decode_topic_config("t", z.encode_topic_config({"retention.ms": "5"})) == {
        "retention.ms": "5"
    }
    change = z.encode_isr_change([("b", 1), ("a", 0)])
    assert z.decode_isr_change(change) == [("a", 0), ("b", 1)]
    assert json.loads(z.encode_config_change("topics/t")) == {
        "version": 2,
        "entity_path": "topics/t",
    }
    assert z.decode_cluster_id(z.encode_cluster_id("abc")) == "abc"
    assert z.decode_producer_id_block(z.encode_producer_id_block(1, 1000, 1999)) == (1000, 1999)


@pytest.mark.parametrize(
    ("decode", "data"),
    [
        (lambda d: z.decode_broker(1, d), b"not json"),
        (lambda d: z.decode_broker(1, d), b'{"endpoints":["nonsense"]}'),
        (lambda d: z.decode_broker(1, d), b"{}"),
        (lambda d: z.decode_assignment("t", d), b'{"partitions":{"x":[1]}}'),
        (lambda d: z.decode_assignment("t", d), b"[1,2]"),
        (z.decode_partition_state, b'{"leader":1}'),
        (z.decode_controller, b'{"brokerid":"x"}'),
        (z.decode_controller_epoch, b"one"),
        (z.decode_isr_change, b'{"partitions":[{"topic":"t"}]}'),
        (z.decode_producer_id_block, b'{"block_start":"1"}'),
    ],
)
def test_unreadable_data_is_a_clear_error(decode, data):
    with pytest.raises(z.ZkDataError):
        decode(data)


def test_paths():
    assert z.partition_state_path("t", 3) == "/brokers/topics/t/partitions/3/state"
    assert z.broker_path(2) == "/brokers/ids/2" and z.delete_topic_path("x") == (
        "/admin/delete_topics/x"
    )
