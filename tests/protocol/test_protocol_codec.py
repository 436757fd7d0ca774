"""The generic codec: every declared API and version round-trips, defaults fill in,
records stay untouched parts, flexible structs carry tagged fields."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.protocol import apis, codec
from broker.protocol.apis import API_BY_KEY, FETCH, METADATA, PRODUCE, Api, ApiKey
from broker.protocol.codec import (
    compile_struct,
    decode_request_body,
    decode_response_body,
    encode_request_body,
    encode_response_body,
)
from broker.protocol.types import (
    INT16,
    INT32,
    INT64,
    RECORDS,
    STRING,
    UUID,
    Array,
    DecodeError,
    EncodeError,
    Field,
    Reader,
    Struct,
    Writer,
)
from tests.helpers.protocol_samples import all_api_versions, api_body_strategy, assert_matches

ALL = all_api_versions()
IDS = [f"{API_BY_KEY[k].name}-v{v}" for k, v in ALL]


def _join(parts: list) -> bytes:
    assert all(isinstance(p, bytes) for p in parts), parts
    return b"".join(parts)


def test_every_api_of_the_design_table_is_declared():
    expected = {
        0: (0, 12), 1: (4, 11), 2: (1, 7), 3: (0, 9), 8: (2, 8), 9: (1, 7), 10: (0, 4),
        11: (0, 7), 12: (0, 4), 13: (0, 5), 14: (0, 5), 15: (0, 5), 16: (0, 4),
        17: (0, 1), 18: (0, 3), 19: (2, 4), 20: (1, 3), 22: (0, 5), 32: (0, 4), 33: (0, 2), 37: (0, 3),
        42: (0, 2), 43: (0, 2), 44: (0, 1), 47: (0, 0), 60: (0, 2), 35: (0, 4), 45: (0, 0),
        46: (0, 0), 36: (0, 2), 50: (0, 0), 51: (0, 0), 29: (1, 3), 30: (1, 3), 31: (1, 3),
        4: (3, 3), 5: (1, 1), 6: (5, 5), 7: (2, 2), 23: (0, 3),
        24: (0, 5), 25: (0, 4), 26: (0, 5), 27: (0, 1), 28: (0, 5), 61: (0, 0),
        65: (0, 0), 66: (0, 1),
    }  # fmt: skip
    assert {k: (a.min_version, a.max_version) for k, a in API_BY_KEY.items()} == expected
    assert set(API_BY_KEY) == set(ApiKey)
    # Within our ranges the flexible versions are Produce v9-v12, ApiVersions v3, ListOffsets v6-v7 (v7
    # carries the max-timestamp lookup, KIP-734), Metadata v9 (with which librdkafka
    # trusts leader epochs), the later versions of the group APIs, CreatePartitions v2+,
    # InitProducerId v2+, the transactional APIs v3+ (WriteTxnMarkers v1), ElectLeaders v2, DescribeConfigs v4, AlterConfigs v2, IncrementalAlterConfigs v1,
    # DescribeLogDirs v2+, SaslAuthenticate v2, the ACL APIs v2+, and the reassignment APIs, the SCRAM
    # credential APIs, DescribeCluster and the transaction tools' APIs (DescribeProducers,
    # DescribeTransactions, ListTransactions: flexible from their first version).
    flexible = [(k, v) for k, v in ALL if API_BY_KEY[k].is_flexible(v)]
    assert flexible == [
        (0, 9), (0, 10), (0, 11), (0, 12), (2, 6), (2, 7), (3, 9), (8, 8), (9, 6), (9, 7), (10, 3), (10, 4), (11, 6), (11, 7),
        (12, 4), (13, 4), (13, 5), (14, 4), (14, 5), (15, 5), (16, 3), (16, 4), (18, 3),
        (22, 2), (22, 3), (22, 4), (22, 5), (24, 3), (24, 4), (24, 5), (25, 3), (25, 4),
        (26, 3), (26, 4), (26, 5), (27, 1), (28, 3), (28, 4), (28, 5), (29, 2), (29, 3), (30, 2), (30, 3), (31, 2), (31, 3), (32, 4), (33, 2), (35, 2), (35, 3), (35, 4), (36, 2), (37, 2), (37, 3), (42, 2),
        (43, 2), (44, 1), (45, 0), (46, 0), (50, 0), (51, 0), (60, 0), (60, 1), (60, 2), (61, 0),
        (65, 0), (66, 0), (66, 1),
    ]  # fmt: skip


def test_keys_and_their_names_are_derived_from_the_declarations():
    # One declaration per API: the enum, the key constants and the table follow it.
    assert ApiKey(4).name == "LEADER_AND_ISR"
    assert ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS == 50
    assert apis.OFFSET_FOR_LEADER_EPOCH is ApiKey.OFFSET_FOR_LEADER_EPOCH
    for key, api in API_BY_KEY.items():
        assert getattr(apis, f"{api.constant}_API") is api
        assert getattr(apis, api.constant) is ApiKey[api.constant] == key
    assert list(API_BY_KEY) == sorted(API_BY_KEY)


def test_two_declarations_of_one_key_are_refused():
    empty = Struct()
    one = Api(0, "Produce", 0, 0, None, empty, empty)
    other = Api(0, "Other", 0, 0, None, empty, empty)
    with pytest.raises(ValueError, match="Produce and Other"):
        apis._declared({"A": one, "B": other})


@pytest.mark.parametrize(("api_key", "version"), ALL, ids=IDS)
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_request_round_trip(api_key, version, data):
    body = data.draw(api_body_strategy(api_key, version, response=False))
    encoded = encode_request_body(api_key, version, body)
    decoded = decode_request_body(api_key, version, encoded)
    assert_matches(body, decoded)
    # What we decode encodes back to the same bytes: nothing is lost or invented.
    assert encode_request_body(api_key, version, decoded) == encoded


@pytest.mark.parametrize(("api_key", "version"), ALL, ids=IDS)
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_response_round_trip(api_key, version, data):
    body = data.draw(api_body_strategy(api_key, version, response=True))
    encoded = _join(encode_response_body(api_key, version, body))
    decoded = decode_response_body(api_key, version, encoded)
    assert_matches(body, decoded)
    assert _join(encode_response_body(api_key, version, decoded)) == encoded


def test_decode_at_offset():
    body = {"group_id": "g", "generation_id": 3, "member_id": "m"}
    encoded = b"junk" + encode_request_body(12, 0, body)
    assert decode_request_body(12, 0, encoded, offset=4) == {**body, "group_instance_id": None}


PRODUCE_BODY = {
    "transactional_id": None,
    "acks": -1,
    "timeout_ms": 30000,
    "topic_data": [
        {"name": "events", "partition_data": [{"index": 0, "records": b"\x01" * 100}]},
        {"name": "audit", "partition_data": [{"index": 3, "records": None}]},
    ],
}


def test_produce_request_fields_absent_in_old_versions_decode_to_defaults():
    encoded = encode_request_body(PRODUCE, 2, PRODUCE_BODY)
    decoded = decode_request_body(PRODUCE, 2, encoded)
    assert decoded == PRODUCE_BODY  # transactional_id: v3+, default null
    v3 = decode_request_body(PRODUCE, 3, encode_request_body(PRODUCE, 3, PRODUCE_BODY))
    assert v3 == PRODUCE_BODY
    # v2 has no transactional_id on the wire: two bytes shorter than v3 (null = int16 -1).
    assert len(encode_request_body(PRODUCE, 3, PRODUCE_BODY)) == len(encoded) + 2


def test_metadata_defaults_by_version():
    v0 = decode_request_body(METADATA, 0, encode_request_body(METADATA, 0, {"topics": []}))
    assert v0 == {
        "topics": [],
        "allow_auto_topic_creation": True,
        "include_cluster_authorized_operations": False,
        "include_topic_authorized_operations": False,
    }
    resp = decode_response_body(METADATA, 0, _join(encode_response_body(METADATA, 0, {})))
    assert resp["controller_id"] == -1
    assert resp["cluster_id"] is None
    assert resp["throttle_time_ms"] == 0
    assert resp["brokers"] == [] and resp["topics"] == []


def test_missing_keys_encode_as_defaults_and_extra_keys_are_ignored():
    encoded = encode_response_body(PRODUCE, 8, {"responses": [], "not_a_field": 1})
    # responses count 0, throttle_time_ms 0
    assert _join(encoded) == b"\x00\x00\x00\x00" + b"\x00\x00\x00\x00"
    part = {"index": 1, "error_code": 0, "base_offset": 42}
    body = {"responses": [{"name": "t", "partition_responses": [part]}]}
    decoded = decode_response_body(PRODUCE, 8, _join(encode_response_body(PRODUCE, 8, body)))
    p = decoded["responses"][0]["partition_responses"][0]
    assert p == {
        "index": 1,
        "error_code": 0,
        "base_offset": 42,
        "log_append_time_ms": -1,
        "log_start_offset": -1,
        "record_errors": [],
        "error_message": None,
    }


def test_null_where_not_nullable_is_rejected_both_ways():
    with pytest.raises(EncodeError):
        encode_request_body(METADATA, 0, {"topics": None})  # null topics only from v1
    assert decode_request_body(METADATA, 1, encode_request_body(METADATA, 1, {"topics": None})) == {
        "topics": None,
        "allow_auto_topic_creation": True,
        "include_cluster_authorized_operations": False,
        "include_topic_authorized_operations": False,
    }
    with pytest.raises(DecodeError):
        decode_request_body(METADATA, 0, b"\xff\xff\xff\xff")


def test_encode_errors_name_the_field():
    with pytest.raises(EncodeError) as e:
        encode_request_body(12, 0, {"group_id": "g", "generation_id": "x"})
    assert "generation_id" in "".join(e.value.__notes__)
    with pytest.raises(EncodeError):
        encode_request_body(12, 0, {"generation_id": 2**40})
    with pytest.raises(EncodeError):
        encode_request_body(99, 0, {})
    with pytest.raises(EncodeError):
        encode_request_body(PRODUCE, 13, {})


def test_unknown_api_or_version_is_a_decode_error():
    with pytest.raises(DecodeError):
        decode_request_body(99, 0, b"")
    with pytest.raises(DecodeError):
        decode_request_body(FETCH, 3, b"")


class Region:
    """Stands in for broker.records.region.FileRegion: not bytes, has __len__."""

    def __init__(self, size: int):
        self.size = size

    def __len__(self) -> int:
        return self.size


def _fetch_body(records):
    return {
        "responses": [
            {
                "topic": "t",
                "partitions": [
                    {"partition_index": 0, "high_watermark": 10, "records": records},
                ],
            }
        ]
    }


def test_fetch_records_parts_stay_untouched():
    region = Region(5000)
    big = b"B" * 4096
    parts = encode_response_body(FETCH, 11, _fetch_body([b"head", region, big]))
    assert parts[1] is region
    assert len(parts) == 3
    # records length = 4 + 5000 + 4096, written right before the first part
    assert parts[0][-4 - 4 :] == (9100).to_bytes(4, "big") + b"head"
    assert parts[2] == big
    # the records bytes really are the end of the message
    assert codec.body_codec(FETCH, 11, True).min_size > 0


def test_large_records_bytes_are_not_copied_into_the_buffer():
    big = b"R" * 100_000
    w = Writer()
    compile_struct(API_BY_KEY[FETCH].response, 11, False).encode(w, _fetch_body(big))
    # the writer keeps a reference to the records rather than a copy
    assert any(p is big for p in w._parts)
    decoded = decode_response_body(FETCH, 11, b"".join(w.getparts()))
    assert decoded["responses"][0]["partitions"][0]["records"] == big


def test_records_list_of_bytes_is_concatenated():
    parts = encode_response_body(FETCH, 4, _fetch_body([b"abc", b"def"]))
    decoded = decode_response_body(FETCH, 4, _join(parts))
    p = decoded["responses"][0]["partitions"][0]
    assert p["records"] == b"abcdef"
    assert p["aborted_transactions"] is None
    assert p["last_stable_offset"] == -1 and p["preferred_read_replica"] == -1


# A flexible struct exercising what our declared ranges barely use: compact types,
# nested tagged fields, unknown tags, inline structs, UUIDs.
FLEX = Struct(
    Field("name", STRING, nullable="0+"),
    Field("id", UUID),
    Field("items", Array(Struct(
        Field("n", INT32),
        Field("note", STRING, tag=0, default="none"),
    ))),
    Field("ints", Array(INT64)),
    Field("records", RECORDS, nullable="0+"),
    Field("leader", Struct(Field("leader_id", INT32, default=-1), Field("epoch", INT32, default=-1)), tag=5),
    Field("count", INT16, tag=2, default=7),
)  # fmt: skip


def _flex_round_trip(value: dict) -> tuple[bytes, dict]:
    c = compile_struct(FLEX, 0, True)
    w = Writer()
    c.encode(w, value)
    data = w.getvalue()
    return data, c.decode(Reader(data))


def test_flexible_struct_round_trip_and_tag_defaults():
    value = {
        "name": "n",
        "id": uuid.UUID(int=1),
        "items": [{"n": 1, "note": "x"}, {"n": 2}],
        "ints": [1, -2],
        "records": b"rr",
        "count": 9,
    }
    data, out = _flex_round_trip(value)
    assert out == {
        **value,
        "items": [{"n": 1, "note": "x"}, {"n": 2, "note": "none"}],
        "leader": {"leader_id": -1, "epoch": -1},
    }
    expected = (
        b"\x02n"  # compact string
        + uuid.UUID(int=1).bytes
        + b"\x03"  # compact array of 2
        + b"\x00\x00\x00\x01" + b"\x01" + b"\x00\x02" + b"\x02x"  # n=1; 1 tag: 0, size 2, "x"
        + b"\x00\x00\x00\x02" + b"\x00"  # n=2, default note is not written
        + b"\x03" + (1).to_bytes(8, "big") + (-2).to_bytes(8, "big", signed=True)
        + b"\x03rr"
        + b"\x01" + b"\x02\x02\x00\x09"  # one tagged field: tag 2, size 2, int16 9
    )  # fmt: skip
    assert data == expected


def test_flexible_struct_skips_unknown_tags_and_reads_known_ones_in_any_order():
    c = compile_struct(FLEX, 0, True)
    data = (
        b"\x00" + bytes(16) + b"\x01" + b"\x01" + b"\x00"
        + b"\x03"
        + b"\x05\x09" + (3).to_bytes(4, "big") + (4).to_bytes(4, "big") + b"\x00"  # leader: tag 5
        + b"\x63\x03abc"  # unknown tag 99
        + b"\x02\x02\x00\x01"  # count (tag 2)
    )  # fmt: skip
    out = c.decode(Reader(data))
    assert out["name"] is None and out["items"] == [] and out["records"] is None
    assert out["leader"] == {"leader_id": 3, "epoch": 4}
    assert out["count"] == 1


def test_flexible_tagged_field_size_is_bounded():
    c = compile_struct(FLEX, 0, True)
    # tag 2 claims 100 bytes
    data = b"\x00" + bytes(16) + b"\x01\x01\x00" + b"\x01\x02\x64\x00\x01"
    with pytest.raises(DecodeError):
        c.decode(Reader(data))


def test_compiled_codecs_are_cached():
    api = API_BY_KEY[PRODUCE]
    assert compile_struct(api.request, 7, False) is compile_struct(api.request, 7, False)
    assert codec.body_codec(PRODUCE, 7, False) is codec.body_codec(PRODUCE, 7, False)
