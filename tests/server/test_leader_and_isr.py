"""LeaderAndIsr in process: a broker told it no longer leads refuses writes and, from the
same moment, names the new leader in its Metadata answers (before the controller's
UpdateMetadata arrives), so a client it refuses is sent to the right broker at once."""

from __future__ import annotations

from broker.protocol.apis import LEADER_AND_ISR, METADATA, UPDATE_METADATA
from broker.protocol.errors import ErrorCode
from tests.helpers.server_requests import create, produce, values

# A single broker refuses every controller epoch below this one (broker/server/modes/local.py):
# the tests speak to the in-process broker as a controller of that epoch.
EPOCH = 2**31 - 1


def _partition_state(leader: int, epoch: int, isr, replicas=(0, 1)) -> dict:
    return {
        "partition_index": 0, "controller_epoch": EPOCH, "leader": leader, "leader_epoch": epoch,
        "isr": list(isr), "zk_version": epoch, "replicas": list(replicas),
    }  # fmt: skip


def _update_metadata(broker, leader: int, epoch: int) -> None:
    live = [
        {"id": i, "endpoints": [{"port": 9092 + i, "host": "127.0.0.1", "listener": "PLAINTEXT",
                                 "security_protocol": 0}], "rack": None}
        for i in (0, 1)
    ]  # fmt: skip
    state = {**_partition_state(leader, epoch, (0, 1)), "offline_replicas": []}
    body = {
        "controller_id": 1, "controller_epoch": EPOCH, "broker_epoch": -1,
        "topic_states": [{"topic_name": "t", "partition_states": [state]}],
        "live_brokers": live,
    }  # fmt: skip
    assert broker.call(UPDATE_METADATA, 5, body)["error_code"] == ErrorCode.NONE


def _leader_and_isr(broker, leader: int, epoch: int, isr) -> dict:
    state = {**_partition_state(leader, epoch, isr), "adding_replicas": [],
             "removing_replicas": [], "is_new": False}  # fmt: skip
    body = {
        "controller_id": 1, "controller_epoch": EPOCH, "broker_epoch": -1,
        "topic_states": [{"topic_name": "t", "partition_states": [state]}],
        "live_leaders": [{"broker_id": leader, "host_name": "127.0.0.1", "port": 9092 + leader}],
    }  # fmt: skip
    return broker.call(LEADER_AND_ISR, 3, body)


def _leader_in_metadata(broker) -> tuple[int, int, list[int]]:
    md = broker.call(METADATA, 9, {"topics": [{"name": "t"}], "allow_auto_topic_creation": False})
    (p,) = md["topics"][0]["partitions"]
    return p["leader_id"], p["leader_epoch"], p["isr_nodes"]


def test_a_broker_that_stops_leading_names_the_new_leader_at_once(broker):
    create(broker, "t")
    _update_metadata(broker, leader=0, epoch=1)
    _leader_and_isr(broker, leader=0, epoch=1, isr=(0,))  # acks=all needs no follower
    assert produce(broker, "t", values(b"a"))["error_code"] == ErrorCode.NONE

    _leader_and_isr(broker, leader=1, epoch=2, isr=(1,))  # no UpdateMetadata yet
    assert produce(broker, "t", values(b"b"))["error_code"] == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert _leader_in_metadata(broker) == (1, 2, [1])


def test_an_older_leader_and_isr_does_not_move_the_metadata_back(broker):
    create(broker, "t")
    _update_metadata(broker, leader=1, epoch=3)
    _leader_and_isr(broker, leader=0, epoch=2, isr=(0, 1))  # stale: epoch 2 < 3
    assert _leader_in_metadata(broker) == (1, 3, [0, 1])
