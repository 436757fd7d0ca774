"""Cross-check against kafka-python's hand-written protocol classes
(`kafka.protocol.old`), an implementation independent of ours.

Generic check, every API and version both libraries have: bytes we encode are
parsed by kafka-python and re-encoded by it to the same bytes, with the same
field values; a frame kafka-python builds (its header included) decodes with ours.
Then a few requests built directly with kafka-python's constructors.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.protocol import metadata as metadata_v
from kafka.protocol.consumer import offsets
from kafka.protocol.old import (
    add_offsets_to_txn,
    add_partitions_to_txn,
    admin,
    api_versions,
    commit,
    end_txn,
    fetch,
    find_coordinator,
    group,
    init_producer_id,
    list_offsets,
    metadata,
    offset_for_leader_epoch,
    produce,
    sasl_authenticate,
    sasl_handshake,
    txn_offset_commit,
)
from kafka.protocol.old.types import Schema

from broker.protocol.apis import API_BY_KEY
from broker.protocol.codec import decode_request_body, encode_request_body, encode_response_body
from broker.protocol.framing import RequestHeader, decode_request, decode_response
from tests.helpers.protocol_samples import all_api_versions, api_body_strategy, assert_matches

# api key -> (request classes by version, response classes by version)
KAFKA_PYTHON = {
    0: (produce.ProduceRequest, produce.ProduceResponse),
    1: (fetch.FetchRequest, fetch.FetchResponse),
    2: (list_offsets.ListOffsetsRequest, list_offsets.ListOffsetsResponse),
    3: (metadata.MetadataRequest, metadata.MetadataResponse),
    8: (commit.OffsetCommitRequest, commit.OffsetCommitResponse),
    9: (commit.OffsetFetchRequest, commit.OffsetFetchResponse),
    10: (find_coordinator.FindCoordinatorRequest, find_coordinator.FindCoordinatorResponse),
    11: (group.JoinGroupRequest, group.JoinGroupResponse),
    12: (group.HeartbeatRequest, group.HeartbeatResponse),
    13: (group.LeaveGroupRequest, group.LeaveGroupResponse),
    14: (group.SyncGroupRequest, group.SyncGroupResponse),
    15: (admin.DescribeGroupsRequest, admin.DescribeGroupsResponse),
    16: (admin.ListGroupsRequest, admin.ListGroupsResponse),
    17: (sasl_handshake.SaslHandshakeRequest, sasl_handshake.SaslHandshakeResponse),
    18: (api_versions.ApiVersionsRequest, api_versions.ApiVersionsResponse),
    19: (admin.CreateTopicsRequest, admin.CreateTopicsResponse),
    20: (admin.DeleteTopicsRequest, admin.DeleteTopicsResponse),
    22: (init_producer_id.InitProducerIdRequest, init_producer_id.InitProducerIdResponse),
    32: (admin.DescribeConfigsRequest, admin.DescribeConfigsResponse),
    36: (sasl_authenticate.SaslAuthenticateRequest, sasl_authenticate.SaslAuthenticateResponse),
    42: (admin.DeleteGroupsRequest, admin.DeleteGroupsResponse),
    43: (admin.ElectLeadersRequest, admin.ElectLeadersResponse),
    24: (
        add_partitions_to_txn.AddPartitionsToTxnRequest,
        add_partitions_to_txn.AddPartitionsToTxnResponse,
    ),
    25: (add_offsets_to_txn.AddOffsetsToTxnRequest, add_offsets_to_txn.AddOffsetsToTxnResponse),
    26: (end_txn.EndTxnRequest, end_txn.EndTxnResponse),
    28: (txn_offset_commit.TxnOffsetCommitRequest, txn_offset_commit.TxnOffsetCommitResponse),
    23: (
        offset_for_leader_epoch.OffsetForLeaderEpochRequest,
        offset_for_leader_epoch.OffsetForLeaderEpochResponse,
    ),
}
# Broker-to-broker only: kafka-python has no classes for them.
INTER_BROKER = {4, 5, 6, 7, 27}


def _has(api_key: int, version: int) -> bool:
    # kafka-python's ListGroupsRequest "v2" class says API_VERSION = 1: not usable.
    if api_key in INTER_BROKER or api_key not in KAFKA_PYTHON:
        return False
    return all(
        version < len(classes) and classes[version].API_VERSION == version
        for classes in KAFKA_PYTHON[api_key]
    )


BOTH = [(k, v) for k, v in all_api_versions() if _has(k, v)]
IDS = [f"{API_BY_KEY[k].name}-v{v}" for k, v in BOTH]


def test_kafka_python_covers_nearly_all_our_versions():
    missing = sorted(set(all_api_versions()) - set(BOTH))
    # See _has; kafka-python's old classes stop before the flexible versions of most APIs
    # (ListOffsets v6+, Metadata v9, CreateTopics v4, the group APIs' later versions) and
    # have no OffsetDelete, DescribeLogDirs, reassignment, DescribeCluster, DescribeProducers, SCRAM credential or
    # IncrementalAlterConfigs classes (nor usable ACL ones: their DescribeAcls "v2" is not
    # flexible) (and DescribeConfigs up to v2 only; their AlterConfigs
    # response list holds a request class; we check those against the generated ones);
    # their CreatePartitions nests its fields differently (same bytes): its generated
    # classes have them all (test_generated_classes_agree).
    assert [m for m in missing if m[0] not in INTER_BROKER] == [
        (0, 9), (0, 10), (0, 11), (0, 12), (2, 6), (2, 7), (3, 9), (8, 8), (9, 6), (9, 7), (10, 3), (10, 4), (11, 6), (11, 7),
        (12, 4), (13, 4), (13, 5), (14, 4), (14, 5), (15, 4), (15, 5), (16, 2), (16, 3),
        (16, 4), (19, 4), (22, 2), (22, 3), (22, 4), (22, 5), (24, 3), (24, 4), (24, 5), (25, 3),
        (25, 4), (26, 3), (26, 4), (26, 5), (28, 3), (28, 4), (28, 5), (29, 1), (29, 2), (29, 3), (30, 1), (30, 2), (30, 3), (31, 1),
        (31, 2), (31, 3), (32, 3), (32, 4), (33, 0), (33, 1), (33, 2), (35, 0), (35, 1),
        (35, 2), (35, 3), (35, 4), (36, 2), (37, 0), (37, 1), (37, 2), (37, 3), (42, 2),
        (43, 2), (44, 0), (44, 1), (45, 0), (46, 0), (47, 0), (50, 0), (51, 0), (60, 0),
        (60, 1), (60, 2), (61, 0), (65, 0), (66, 0), (66, 1),
    ]  # fmt: skip
    assert {m for m in missing if m[0] in GENERATED_ONLY} <= set(GENERATED)


def test_flexible_metadata_matches_kafka_pythons_generated_classes():
    """Metadata v9 is flexible; librdkafka trusts leader epochs from v9 on."""
    req_cls, resp_cls = metadata_v.MetadataRequest, metadata_v.MetadataResponse
    theirs = req_cls(
        version=9,
        topics=[req_cls.MetadataRequestTopic(name="t")],
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    body = decode_request_body(3, 9, bytes(theirs.encode()))
    assert body["topics"] == [{"name": "t"}] and body["allow_auto_topic_creation"] is False
    assert encode_request_body(3, 9, body) == bytes(theirs.encode())
    ours = {
        "throttle_time_ms": 0,
        "brokers": [{"node_id": 1, "host": "h", "port": 9092, "rack": None}],
        "cluster_id": "c",
        "controller_id": 1,
        "topics": [
            {"error_code": 0, "name": "t", "is_internal": False, "partitions": [
                {"error_code": 0, "partition_index": 0, "leader_id": 1, "leader_epoch": 7,
                 "replica_nodes": [1, 2], "isr_nodes": [1], "offline_replicas": [2]}
            ], "topic_authorized_operations": -(2**31)}
        ],
        "cluster_authorized_operations": -(2**31),
    }  # fmt: skip
    data = b"".join(encode_response_body(3, 9, ours))
    decoded = resp_cls.decode(data, version=9)
    (topic,) = decoded.topics
    (partition,) = topic.partitions
    assert (partition.leader_epoch, partition.offline_replicas) == (7, [2])
    assert decoded.controller_id == 1 and decoded.brokers[0].port == 9092


@pytest.mark.parametrize("version", [6, 7])
def test_flexible_list_offsets_match_kafka_pythons_generated_classes(version):
    """ListOffsets v6+ is flexible and v7 brings the max-timestamp lookup (-3)."""
    req_cls, resp_cls = offsets.ListOffsetsRequest, offsets.ListOffsetsResponse
    topic_cls = req_cls.ListOffsetsTopic
    theirs = req_cls(
        version=version,
        replica_id=-1,
        isolation_level=1,
        topics=[
            topic_cls(
                name="t",
                partitions=[
                    topic_cls.ListOffsetsPartition(
                        partition_index=3, current_leader_epoch=7, timestamp=-3
                    )
                ],
            )
        ],
    )
    body = decode_request_body(2, version, bytes(theirs.encode()))
    assert body == {
        "replica_id": -1,
        "isolation_level": 1,
        "topics": [
            {"name": "t", "partitions": [
                {"partition_index": 3, "current_leader_epoch": 7, "timestamp": -3}
            ]}
        ],
    }  # fmt: skip
    assert encode_request_body(2, version, body) == bytes(theirs.encode())
    ours = {
        "throttle_time_ms": 0,
        "topics": [
            {"name": "t", "partitions": [
                {"partition_index": 3, "error_code": 0, "timestamp": 99, "offset": 42,
                 "leader_epoch": 7}
            ]}
        ],
    }  # fmt: skip
    data = b"".join(encode_response_body(2, version, ours))
    decoded = resp_cls.decode(data, version=version)
    partition = decoded.topics[0].partitions[0]
    assert (partition.offset, partition.timestamp, partition.leader_epoch) == (42, 99, 7)
    topic_resp = resp_cls.ListOffsetsTopicResponse
    built = resp_cls(
        version=version,
        throttle_time_ms=0,
        topics=[
            topic_resp(
                name="t",
                partitions=[
                    topic_resp.ListOffsetsPartitionResponse(
                        partition_index=3, error_code=0, timestamp=99, offset=42, leader_epoch=7
                    )
                ],
            )
        ],
    )
    assert bytes(built.encode()) == data


def _kafka_python_class(api_key: int, version: int, response: bool):
    cls = KAFKA_PYTHON[api_key][1 if response else 0][version]
    assert cls.API_KEY == api_key and cls.API_VERSION == version
    return cls


def _agree(theirs, ours, path: str = "body") -> None:
    """kafka-python's decoded value matches ours field by field.

    Representational differences allowed: kafka-python keeps raw tagged fields
    under "tags" (we decode them by name); it declares some arrays of one-field
    structs as arrays of that field (Metadata v0-8 topics); it turns Metadata's
    *_authorized_operations into a set of bits named "authorized_operations"
    (the bytes are still compared exactly by the callers).
    """
    if isinstance(theirs, dict):
        for k, v in theirs.items():
            if k not in ("tags", "authorized_operations"):
                assert k in ours, f"{path}.{k} missing in ours"
                _agree(v, ours[k], f"{path}.{k}")
    elif isinstance(theirs, list):
        assert isinstance(ours, list) and len(ours) == len(theirs), path
        for i, (t, o) in enumerate(zip(theirs, ours, strict=True)):
            _agree(t, o, f"{path}[{i}]")
    elif isinstance(ours, dict) and len(ours) == 1:
        _agree(theirs, next(iter(ours.values())), path)
    else:
        assert theirs == ours, f"{path}: {theirs!r} != {ours!r}"


def _fields(schema, value) -> dict:
    """kafka-python's decoded struct as a dict (its own to_object() trips over null arrays)."""
    out = {}
    for i, (name, typ) in enumerate(zip(schema.names, schema.fields, strict=True)):
        if name == "tags":
            continue  # raw tagged fields, not always kept on decoded array elements
        v = value.get_item(name) if hasattr(value, "get_item") else value[i]
        elem = getattr(typ, "array_of", None)
        if v is not None and isinstance(typ, Schema):
            v = _fields(typ, v)
        elif v is not None and isinstance(elem, Schema):
            v = [_fields(elem, x) for x in v]
        out[name] = v
    return out


SETTINGS = settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _generated_classes() -> dict[tuple[int, bool], type]:
    """kafka-python's classes generated from Kafka's message JSON, by (api key, request)."""
    import importlib
    import pkgutil

    import kafka.protocol
    from kafka.protocol.api_message import ApiMessage

    found = {}
    for info in pkgutil.walk_packages(kafka.protocol.__path__, "kafka.protocol."):
        if ".old" in info.name or info.name.endswith("generate_stubs"):
            continue
        module = importlib.import_module(info.name)
        for value in vars(module).values():
            if (
                isinstance(value, type)
                and issubclass(value, ApiMessage)
                and value is not ApiMessage
            ):
                found[(value.API_KEY, value.is_request())] = value
    return found


GENERATED_CLASSES = _generated_classes()
# The group, transaction, cluster-operation and SCRAM-administration APIs (and
# SaslAuthenticate v2) at
# the versions only the generated classes cover.
GENERATED_ONLY = {
    0, 8, 9, 22, 24, 25, 26, 28, 10, 11, 12, 13, 14, 15, 16, 29, 30, 31, 32, 33, 35, 36, 37, 42, 43, 44, 45, 46, 47,
    50, 51, 60, 61, 65, 66,
}  # fmt: skip
GENERATED = [
    (k, v)
    for k, v in all_api_versions()
    if k in GENERATED_ONLY and not _has(k, v) and (k, True) in GENERATED_CLASSES
]


@pytest.mark.parametrize(
    ("api_key", "version"), GENERATED, ids=[f"{API_BY_KEY[k].name}-v{v}" for k, v in GENERATED]
)
@pytest.mark.parametrize("response", [False, True], ids=["request", "response"])
@SETTINGS
@given(data=st.data())
def test_generated_classes_agree(api_key, version, response, data):
    """Bytes we encode decode with kafka-python's generated class and encode back the same."""
    body = data.draw(api_body_strategy(api_key, version, response=response))
    if response:
        ours = b"".join(bytes(p) for p in encode_response_body(api_key, version, body))
    else:
        ours = encode_request_body(api_key, version, body)
    cls = GENERATED_CLASSES[(api_key, not response)]
    theirs = cls.decode(ours, version=version)
    assert bytes(theirs.encode()) == ours


@pytest.mark.parametrize(("api_key", "version"), BOTH, ids=IDS)
@SETTINGS
@given(data=st.data())
def test_requests_agree(api_key, version, data):
    body = data.draw(api_body_strategy(api_key, version, response=False))
    ours = encode_request_body(api_key, version, body)
    cls = _kafka_python_class(api_key, version, False)
    theirs = cls.decode(ours)
    assert theirs.encode() == ours
    _agree(_fields(cls.SCHEMA, theirs), body)

    theirs.with_header(correlation_id=123, client_id="kp")
    frame = theirs.encode(header=True, framed=True)
    assert int.from_bytes(frame[:4], "big") == len(frame) - 4
    header, decoded = decode_request(frame[4:])
    assert header == RequestHeader(api_key, version, 123, "kp")
    assert_matches(body, decoded)


@pytest.mark.parametrize(("api_key", "version"), BOTH, ids=IDS)
@SETTINGS
@given(data=st.data())
def test_responses_agree(api_key, version, data):
    body = data.draw(api_body_strategy(api_key, version, response=True))
    if api_key == 18:
        # kafka-python reads every ApiVersions error response as v0 (which is what
        # brokers send for UNSUPPORTED_VERSION); compare the full layout on success.
        body["error_code"] = 0
    ours = b"".join(encode_response_body(api_key, version, body))
    cls = _kafka_python_class(api_key, version, True)
    theirs = cls.decode(ours)
    assert theirs.encode() == ours
    _agree(_fields(cls.SCHEMA, theirs), body)

    theirs.with_header(correlation_id=321)
    corr, decoded = decode_response(api_key, version, theirs.encode(header=True))
    assert corr == 321
    assert_matches(body, decoded)


def _request(cls_obj, correlation_id: int = 7, client_id: str = "kafka-python") -> bytes:
    cls_obj.with_header(correlation_id=correlation_id, client_id=client_id)
    return cls_obj.encode(header=True, framed=True)[4:]


def test_kafka_python_metadata_requests():
    header, body = decode_request(_request(metadata.MetadataRequest[0](topics=["a", "b"])))
    assert header == RequestHeader(3, 0, 7, "kafka-python")
    assert body["topics"] == [{"name": "a"}, {"name": "b"}]
    _, body = decode_request(_request(metadata.MetadataRequest[1](topics=None)))
    assert body["topics"] is None
    _, body = decode_request(
        _request(
            metadata.MetadataRequest[8](
                topics=["t"],
                allow_auto_topic_creation=False,
                include_cluster_authorized_operations=True,
                include_topic_authorized_operations=False,
            )
        )
    )
    assert body == {
        "topics": [{"name": "t"}],
        "allow_auto_topic_creation": False,
        "include_cluster_authorized_operations": True,
        "include_topic_authorized_operations": False,
    }


def test_kafka_python_produce_request():
    batch = bytes(range(256)) * 8
    req = produce.ProduceRequest[7](
        transactional_id=None,
        acks=-1,
        timeout_ms=30000,
        topic_data=[("events", [(0, batch), (1, None)])],
    )
    header, body = decode_request(_request(req))
    assert header.api_key == 0 and header.api_version == 7
    assert body == {
        "transactional_id": None,
        "acks": -1,
        "timeout_ms": 30000,
        "topic_data": [
            {
                "name": "events",
                "partition_data": [{"index": 0, "records": batch}, {"index": 1, "records": None}],
            }
        ],
    }


def test_kafka_python_fetch_request():
    req = fetch.FetchRequest[11](
        replica_id=-1,
        max_wait_ms=500,
        min_bytes=1,
        max_bytes=52428800,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=[("events", [(0, -1, 42, -1, 1048576)])],
        forgotten_topics_data=[],
        rack_id="",
    )
    _, body = decode_request(_request(req))
    assert body["max_bytes"] == 52428800
    assert body["topics"] == [
        {
            "topic": "events",
            "partitions": [
                {
                    "partition": 0,
                    "current_leader_epoch": -1,
                    "fetch_offset": 42,
                    "log_start_offset": -1,
                    "partition_max_bytes": 1048576,
                }
            ],
        }
    ]
    # Fetch v4 lacks the v5+/v7+ fields: they decode to their defaults.
    req4 = fetch.FetchRequest[4](-1, 500, 1, 1000, 1, [("t", [(3, 9, 100)])])
    _, body4 = decode_request(_request(req4))
    assert body4["isolation_level"] == 1
    assert body4["session_epoch"] == -1 and body4["rack_id"] == ""
    assert body4["topics"][0]["partitions"][0] == {
        "partition": 3,
        "current_leader_epoch": -1,
        "fetch_offset": 9,
        "log_start_offset": -1,
        "partition_max_bytes": 100,
    }


def test_kafka_python_flexible_api_versions_request():
    req = api_versions.ApiVersionsRequest[3](
        client_software_name="kafka-python", client_software_version="3.0.12"
    )
    header, body = decode_request(_request(req, correlation_id=1))
    assert header == RequestHeader(18, 3, 1, "kafka-python")
    assert body == {"client_software_name": "kafka-python", "client_software_version": "3.0.12"}


def test_kafka_python_reads_our_api_versions_error():
    from broker.protocol.framing import encode_api_versions_error

    frame = b"".join(encode_api_versions_error(9, {18: (0, 3), 3: (0, 8)}))
    resp = api_versions.ApiVersionsResponse[0].decode(frame[8:])
    assert resp.error_code == 35
    assert [tuple(k) for k in resp.api_keys] == [(3, 0, 8), (18, 0, 3)]
