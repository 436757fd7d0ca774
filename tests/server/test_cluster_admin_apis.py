"""CreatePartitions, ElectLeaders, DescribeCluster, DescribeLogDirs and the reassignment
APIs on a single broker, in process (tests/controller/ and tests/cluster/ have them in a
cluster)."""

from __future__ import annotations

from broker.protocol.apis import (
    ALTER_PARTITION_REASSIGNMENTS,
    CREATE_PARTITIONS,
    DESCRIBE_CLUSTER,
    DESCRIBE_LOG_DIRS,
    ELECT_LEADERS,
    LIST_PARTITION_REASSIGNMENTS,
)
from broker.protocol.errors import ErrorCode as E
from tests.helpers.server_requests import create, produce, values


def create_partitions(broker, *topics, validate_only=False, version=3) -> dict[str, tuple]:
    body = {
        "topics": [
            {
                "name": name,
                "count": count,
                "assignments": None
                if assignment is None
                else [{"broker_ids": ids} for ids in assignment],
            }
            for name, count, assignment in topics
        ],
        "timeout_ms": 5000,
        "validate_only": validate_only,
    }
    answer = broker.call(CREATE_PARTITIONS, version, body)
    return {r["name"]: (r["error_code"], r["error_message"]) for r in answer["results"]}


def test_partitions_are_added_and_served(broker):
    create(broker, "t", partitions=2)
    assert create_partitions(broker, ("t", 4, None)) == {"t": (0, None)}
    assert broker.state.metadata.partition_count("t") == 4
    assert produce(broker, "t", values(b"x"), partition=3)["error_code"] == 0


def test_validate_only_changes_nothing(broker):
    create(broker, "t", partitions=2)
    assert create_partitions(broker, ("t", 3, None), validate_only=True)["t"][0] == 0
    assert broker.state.metadata.partition_count("t") == 2


def test_partition_requests_refused_with_a_reason(broker):
    create(broker, "t", partitions=2)
    answer = create_partitions(
        broker, ("t", 2, None), ("nope", 3, None), ("t2", 5, None), ("t2", 6, None)
    )
    assert answer["t"][0] == E.INVALID_PARTITIONS
    assert "currently has 2 partitions" in answer["t"][1]
    assert answer["nope"][0] == E.UNKNOWN_TOPIC_OR_PARTITION
    assert answer["t2"][0] == E.INVALID_REQUEST  # named twice
    bad = create_partitions(broker, ("t", 4, [[0]]), version=1)
    assert bad["t"][0] == E.INVALID_REPLICA_ASSIGNMENT  # two partitions, one assignment
    unknown_broker = create_partitions(broker, ("t", 3, [[7]]))
    assert unknown_broker["t"][0] == E.INVALID_REPLICA_ASSIGNMENT
    assert broker.state.metadata.partition_count("t") == 2


def test_elect_leaders_on_a_single_broker(broker):
    create(broker, "t", partitions=2)
    body = {
        "election_type": 0,
        "topic_partitions": [
            {"topic": "t", "partitions": [0, 1]},
            {"topic": "x", "partitions": [0]},
        ],
        "timeout_ms": 1000,
    }
    answer = broker.call(ELECT_LEADERS, 2, body)
    errors = {
        (t["topic"], p["partition_id"]): p["error_code"]
        for t in answer["replica_election_results"]
        for p in t["partition_result"]
    }
    assert errors == {
        ("t", 0): E.ELECTION_NOT_NEEDED,
        ("t", 1): E.ELECTION_NOT_NEEDED,
        ("x", 0): E.UNKNOWN_TOPIC_OR_PARTITION,
    }
    everything = broker.call(ELECT_LEADERS, 1, {**body, "topic_partitions": None})
    assert everything["replica_election_results"] == []  # none needed one


def test_describe_cluster(broker):
    answer = broker.call(DESCRIBE_CLUSTER, 0, {"include_cluster_authorized_operations": False})
    assert answer["error_code"] == 0
    asked = {"include_cluster_authorized_operations": False, "include_fenced_brokers": True}
    assert broker.call(DESCRIBE_CLUSTER, 2, {**asked, "endpoint_type": 1})["brokers"]
    controllers = broker.call(DESCRIBE_CLUSTER, 2, {**asked, "endpoint_type": 2})
    assert controllers["error_code"] == E.UNSUPPORTED_ENDPOINT_TYPE
    assert answer["cluster_id"] == broker.state.metadata.cluster_id
    assert answer["controller_id"] == 0
    assert [(b["broker_id"], b["port"]) for b in answer["brokers"]] == [(0, 9092)]


def test_describe_log_dirs(broker):
    create(broker, "t", partitions=2)
    produce(broker, "t", values(b"x" * 100, b"y"), partition=1)
    answer = broker.call(DESCRIBE_LOG_DIRS, 4, {"topics": None})
    (result,) = answer["results"]
    assert result["error_code"] == 0 and result["total_bytes"] > result["usable_bytes"] > 0
    sizes = {
        (t["name"], p["partition_index"]): (p["partition_size"], p["offset_lag"])
        for t in result["topics"]
        for p in t["partitions"]
    }
    assert sizes[("t", 0)] == (0, 0)
    assert sizes[("t", 1)][0] > 100
    only = broker.call(DESCRIBE_LOG_DIRS, 0, {"topics": [{"topic": "t", "partitions": [1]}]})
    assert [(t["name"], len(t["partitions"])) for t in only["results"][0]["topics"]] == [("t", 1)]


def test_reassignment_on_a_single_broker(broker):
    create(broker, "t")
    body = {
        "timeout_ms": 1000,
        "topics": [{"name": "t", "partitions": [{"partition_index": 0, "replicas": [0]}]}],
    }
    answer = broker.call(ALTER_PARTITION_REASSIGNMENTS, 0, body)
    assert answer["error_code"] == E.INVALID_REQUEST
    assert "single broker" in answer["error_message"]
    listed = broker.call(LIST_PARTITION_REASSIGNMENTS, 0, {"timeout_ms": 1000, "topics": None})
    assert (listed["error_code"], listed["topics"]) == (0, [])
