"""The controller's request bodies as pure functions of its context
(broker/controller/requests.py): who gets what, one request per broker."""

from __future__ import annotations

from broker.cluster import BrokerRegistration, Endpoint, LeaderAndIsr
from broker.controller import requests
from broker.controller.context import ControllerContext
from broker.zk.layout import Reassignment


def _broker(broker_id: int, *listeners: str) -> BrokerRegistration:
    endpoints = tuple(
        Endpoint(
            name,
            f"b{broker_id}-{name.lower()}",
            9000 + i,
            "SSL" if name == "EXTERNAL" else "PLAINTEXT",
        )
        for i, name in enumerate(listeners or ("INTERNAL",))
    )
    return BrokerRegistration(broker_id, endpoints, None, 0, epoch=100 + broker_id)


def _ctx() -> ControllerContext:
    ctx = ControllerContext(controller_id=9, listener="INTERNAL", epoch=3, epoch_zk_version=2)
    ctx.live = {0: _broker(0), 1: _broker(1), 2: _broker(2, "EXTERNAL", "INTERNAL")}
    ctx.assignments = {"t": {0: [2, 1, 3], 1: [1, 0]}, "u": {0: [0]}}
    ctx.states = {
        ("t", 0): LeaderAndIsr(2, 4, (2, 1), 2, zk_version=7),
        ("t", 1): LeaderAndIsr(1, 0, (1, 0), 3, zk_version=0),
    }
    return ctx


def test_leader_and_isr_one_request_per_live_replica():
    ctx = _ctx()
    bodies = requests.leader_and_isr(ctx, [("t", 0), ("t", 1), ("u", 0)], new={("t", 1)})
    # 3 is not live, u-0 has no state yet: neither appears.
    assert sorted(bodies) == [0, 1, 2]
    body = bodies[1]
    assert (body["controller_id"], body["controller_epoch"], body["broker_epoch"]) == (9, 3, 101)
    (topic,) = body["topic_states"]
    assert topic["topic_name"] == "t"
    assert [p["partition_index"] for p in topic["partition_states"]] == [0, 1]
    p0, p1 = topic["partition_states"]
    assert p0 == {
        "partition_index": 0,
        "controller_epoch": 2,
        "leader": 2,
        "leader_epoch": 4,
        "isr": [2, 1],
        "zk_version": 7,
        "replicas": [2, 1, 3],
        "adding_replicas": [],
        "removing_replicas": [],
        "is_new": False,
    }
    assert p1["is_new"] is True
    # Its partitions' leaders, at their inter-broker listener.
    assert body["live_leaders"] == [
        {"broker_id": 1, "host_name": "b1-internal", "port": 9000},
        {"broker_id": 2, "host_name": "b2-internal", "port": 9001},
    ]


def test_leader_and_isr_only_to_whom_asked_and_not_to_a_stopping_broker():
    ctx = _ctx()
    assert sorted(requests.leader_and_isr(ctx, [("t", 0), ("t", 1)], only={1})) == [1]
    ctx.shutting_down = {1}
    assert sorted(requests.leader_and_isr(ctx, [("t", 0), ("t", 1)])) == [0, 2]


def test_leader_and_isr_names_a_move_under_way():
    ctx = _ctx()
    ctx.reassigning = {("t", 1): Reassignment.between([1, 0], [1, 2])}
    ctx.assignments["t"][1] = [1, 2, 0]
    (state,) = requests.leader_and_isr(ctx, [("t", 1)], only={0})[0]["topic_states"][0][
        "partition_states"
    ]
    assert (state["replicas"], state["adding_replicas"], state["removing_replicas"]) == (
        [1, 2, 0],
        [2],
        [0],
    )


def test_update_metadata_the_same_picture_to_every_live_broker():
    ctx = _ctx()
    ctx.deleting = {"u"}
    bodies = requests.update_metadata(ctx, [("t", 0), ("u", 0)])
    assert sorted(bodies) == [0, 1, 2]
    assert [b["broker_epoch"] for b in bodies.values()] == [100, 101, 102]
    assert len({repr(b["topic_states"]) for b in bodies.values()}) == 1
    t, u = bodies[0]["topic_states"]
    assert t["partition_states"][0]["offline_replicas"] == [3]
    # A topic being deleted goes out without a state, as the leader brokers drop it at.
    (deleted,) = u["partition_states"]
    assert (deleted["leader"], deleted["controller_epoch"], deleted["isr"]) == (-2, 3, [])
    assert bodies[0]["live_brokers"][2] == {
        "id": 2,
        "endpoints": [
            {"port": 9000, "host": "b2-external", "listener": "EXTERNAL", "security_protocol": 1},
            {"port": 9001, "host": "b2-internal", "listener": "INTERNAL", "security_protocol": 0},
        ],
        "rack": None,
    }


def test_update_metadata_names_replicas_in_a_failed_log_dir_offline():
    ctx = _ctx()
    ctx.offline_dir_replicas = {1: {("t", 0)}}
    bodies = requests.update_metadata(ctx, [("t", 0), ("t", 1)])
    p0, p1 = bodies[0]["topic_states"][0]["partition_states"]
    # Broker 1 is live: only its replica in the failed dir is offline, with dead 3's.
    assert (p0["offline_replicas"], p1["offline_replicas"]) == ([1, 3], [])


def test_update_metadata_leaves_out_partitions_without_a_state():
    assert requests.update_metadata(_ctx(), [("u", 0)])[0]["topic_states"] == []


def test_stop_replica_per_topic_sorted_and_only_to_a_live_broker():
    ctx = _ctx()
    body = requests.stop_replica(ctx, 1, [("t", 1), ("u", 0), ("t", 0)], delete=True)
    assert (body["broker_epoch"], body["delete_partitions"]) == (101, True)
    assert body["topics"] == [
        {"name": "t", "partition_indexes": [0, 1]},
        {"name": "u", "partition_indexes": [0]},
    ]
    assert requests.stop_replica(ctx, 3, [("t", 0)], delete=True) is None
    assert requests.stop_replica(ctx, 1, [], delete=False) is None
