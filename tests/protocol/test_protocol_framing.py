"""Frames and headers, checked against bytes assembled by hand from the protocol spec."""

from __future__ import annotations

import pytest

from broker.protocol.apis import API_BY_KEY, API_VERSIONS, METADATA, Api
from broker.protocol.errors import ErrorCode
from broker.protocol.framing import (
    FrameDecoder,
    FrameTooLarge,
    RequestHeader,
    UnsupportedRequest,
    decode_request,
    decode_request_header,
    decode_response,
    encode_api_versions_error,
    encode_request,
    encode_response,
    request_header_version,
    response_header_version,
)
from broker.protocol.types import INT32, STRING, DecodeError, EncodeError, Struct
from broker.protocol.types import Field as F


def h(text: str) -> bytes:
    return bytes.fromhex(text.replace(" ", ""))


API_VERSIONS_V0 = h("00000016 0012 0000 00000001 000c") + b"kafka-python"

METADATA_V0 = h("00000015 0003 0000 00000002 0001") + b"c" + h("00000001 0004") + b"test"

# What librdkafka (confluent-kafka) sends first: ApiVersions v3, request header v2
# (client_id keeps its int16 length, then an empty tag buffer), compact strings.
API_VERSIONS_V3 = (
    h("0000003e 0012 0003 00000001 0007") + b"rdkafka" + h("00")
    + h("17") + b"confluent-kafka-python" + h("14") + b"2.6.0-rdkafka-2.6.0" + h("00")
)  # fmt: skip


def test_golden_api_versions_v0_request():
    assert encode_request(18, 0, 1, "kafka-python", {}) == API_VERSIONS_V0
    header, body = decode_request(API_VERSIONS_V0[4:])
    assert header == RequestHeader(18, 0, 1, "kafka-python")
    assert body == {"client_software_name": "", "client_software_version": ""}


def test_golden_metadata_v0_request():
    assert encode_request(3, 0, 2, "c", {"topics": [{"name": "test"}]}) == METADATA_V0
    header, body = decode_request(METADATA_V0[4:])
    assert header == RequestHeader(3, 0, 2, "c")
    assert body["topics"] == [{"name": "test"}]


def test_golden_metadata_v1_all_topics_is_null():
    frame = encode_request(3, 1, 9, None, {"topics": None})
    assert frame == h("0000000e 0003 0001 00000009 ffff ffffffff")
    assert decode_request(frame[4:]) == (
        RequestHeader(3, 1, 9, None),
        {
            "topics": None,
            "allow_auto_topic_creation": True,
            "include_cluster_authorized_operations": False,
            "include_topic_authorized_operations": False,
        },
    )


def test_golden_flexible_api_versions_v3_request():
    body = {
        "client_software_name": "confluent-kafka-python",
        "client_software_version": "2.6.0-rdkafka-2.6.0",
    }
    header, offset = decode_request_header(API_VERSIONS_V3[4:])
    assert header == RequestHeader(18, 3, 1, "rdkafka")
    assert offset == 2 + 2 + 4 + 2 + 7 + 1
    assert decode_request(API_VERSIONS_V3[4:]) == (header, body)
    assert encode_request(18, 3, 1, "rdkafka", body) == API_VERSIONS_V3


def test_golden_api_versions_v3_response_has_a_v0_header():
    parts = encode_response(
        18, 3, 7, {"api_keys": [{"api_key": 3, "min_version": 0, "max_version": 8}]}
    )
    expected = (
        h("00000013")  # size
        + h("00000007")  # correlation id, and no tag buffer: response header v0
        + h("0000")  # error_code
        + h("020003 0000 0008 00")  # compact array of one ApiVersion + its tags
        + h("00000000")  # throttle_time_ms
        + h("00")  # tags: features all at their defaults, so not written
    )
    assert parts == [expected]
    corr, body = decode_response(18, 3, expected[4:])
    assert corr == 7
    assert body["api_keys"] == [{"api_key": 3, "min_version": 0, "max_version": 8}]
    assert body["finalized_features_epoch"] == -1


def test_api_versions_v3_response_tagged_features():
    body = {
        "supported_features": [{"name": "metadata.version", "min_version": 1, "max_version": 20}],
        "finalized_features_epoch": 3,
    }
    frame = encode_response(18, 3, 1, body)[0]
    tail = (
        h("02")  # two tagged fields
        + h("00 17 02 11") + b"metadata.version" + h("0001 0014 00")  # tag 0, 23 bytes
        + h("01 08 0000000000000003")  # tag 1: int64
    )  # fmt: skip
    assert frame.endswith(tail)
    _, decoded = decode_response(18, 3, frame[4:])
    assert decoded["supported_features"] == body["supported_features"]
    assert decoded["finalized_features_epoch"] == 3
    assert decoded["finalized_features"] == [] and decoded["zk_migration_ready"] is False


def test_api_versions_error_is_a_v0_body_with_our_ranges():
    parts = encode_api_versions_error(5, {18: (0, 3), 0: (0, 8)})
    expected = (
        h("00000016 00000005")
        + h("0023")  # UNSUPPORTED_VERSION
        + h("00000002 0000 0000 0008 0012 0000 0003")
    )
    assert parts == [expected]
    assert parts == encode_response(
        API_VERSIONS,
        0,
        5,
        {
            "error_code": ErrorCode.UNSUPPORTED_VERSION,
            "api_keys": [
                {"api_key": 0, "min_version": 0, "max_version": 8},
                {"api_key": 18, "min_version": 0, "max_version": 3},
            ],
        },
    )


def test_header_of_an_unknown_api_or_version_still_decodes():
    # ApiVersions v4 (flexible in Kafka, not declared here): read as header v1 so the
    # broker can answer with the correlation id.
    frame = h("0012 0004 0000002a 0003") + b"cli" + h("00") + h("0400")
    header, offset = decode_request_header(frame)
    assert header == RequestHeader(18, 4, 42, "cli")
    assert offset == 13
    with pytest.raises(UnsupportedRequest) as e:
        decode_request(frame)
    assert e.value.header.correlation_id == 42
    assert isinstance(e.value, DecodeError)

    header, _ = decode_request_header(h("03e8 0000 00000001 ffff"))
    assert header == RequestHeader(1000, 0, 1, None)
    with pytest.raises(UnsupportedRequest):
        decode_request(h("03e8 0000 00000001 ffff"))


@pytest.mark.parametrize(
    "frame",
    [
        b"",
        h("0012"),
        h("0012 0000 000000"),
        h("0012 0000 00000001 00"),
        h("0012 0000 00000001 0005") + b"ab",
    ],
)
def test_malformed_header(frame):
    with pytest.raises(DecodeError):
        decode_request_header(frame)


def test_explicit_header_versions():
    # v0: no client_id (ControlledShutdown v0 only)
    assert decode_request_header(h("0007 0000 00000005 abcd"), 0) == (
        RequestHeader(7, 0, 5, None),
        8,
    )
    frame = h("0012 0003 00000001 0001") + b"c" + h("01 05 01 ff")  # one unknown header tag
    assert decode_request_header(frame, 2) == (RequestHeader(18, 3, 1, "c"), 15)
    with pytest.raises(DecodeError):
        decode_request_header(frame[:-1], 2)


def test_header_versions():
    assert request_header_version(18, 3) == 2
    assert request_header_version(18, 2) == 1
    assert request_header_version(0, 8) == 1
    assert response_header_version(18, 3) == 0
    assert response_header_version(3, 8) == 0


FLEX_API = Api(
    1000, "Flex", 0, 1, 1,
    request=Struct(F("name", STRING), F("n", INT32, tag=0)),
    response=Struct(F("error_code", INT32)),
)  # fmt: skip


def test_flexible_headers_of_a_flexible_api(monkeypatch):
    monkeypatch.setitem(API_BY_KEY, 1000, FLEX_API)
    assert request_header_version(1000, 1) == 2 and response_header_version(1000, 1) == 1
    frame = encode_request(1000, 1, 3, "c", {"name": "x", "n": 5})
    assert frame == h("00000015 03e8 0001 00000003 0001") + b"c" + h("00") + h("02") + b"x" + h(
        "01 00 04 00000005"
    )
    assert decode_request(frame[4:]) == (RequestHeader(1000, 1, 3, "c"), {"name": "x", "n": 5})
    # v0 of the same API is not flexible: header v1, no tags, int16 string
    assert (
        encode_request(1000, 0, 3, "c", {"name": "x", "n": 5})
        == h("0000000e 03e8 0000 00000003 0001") + b"c" + h("0001") + b"x"
    )
    resp = encode_response(1000, 1, 9, {"error_code": 1})
    assert resp == [h("0000000a 00000009 00 00000001 00")]
    assert decode_response(1000, 1, resp[0][4:]) == (9, {"error_code": 1})


def test_encoding_an_undeclared_version_fails():
    with pytest.raises(EncodeError):
        encode_request(METADATA, 10, 1, "c", {})
    with pytest.raises(EncodeError):
        encode_response(1, 3, 1, {})


class Region:
    def __init__(self, size: int):
        self.size = size

    def __len__(self) -> int:
        return self.size


def test_fetch_response_frame_counts_regions_in_its_size():
    region = Region(1000)
    body = {
        "responses": [{"topic": "t", "partitions": [{"partition_index": 0, "records": [region]}]}]
    }
    parts = encode_response(1, 11, 77, body)
    assert len(parts) == 2 and parts[1] is region
    size = int.from_bytes(parts[0][:4], "big")
    assert size == len(parts[0]) - 4 + 1000
    assert parts[0][4:8] == (77).to_bytes(4, "big")


def test_fetch_response_with_real_file_regions(tmp_path):
    from broker.records.region import FileRegion

    path = tmp_path / "segment.log"
    path.write_bytes(b"0123456789" * 1000)
    with open(path, "rb") as f:
        regions = [FileRegion(f.fileno(), 10, 2000), FileRegion(f.fileno(), 5000, 30)]
        body = {
            "responses": [
                {
                    "topic": "t",
                    "partitions": [
                        {"partition_index": 0, "records": regions},
                        {"partition_index": 1, "records": regions[1]},
                    ],
                }
            ]
        }
        parts = encode_response(1, 11, 5, body)
        assert [type(p) for p in parts] == [bytes, FileRegion, FileRegion, bytes, FileRegion]
        # What a transport without sendfile would put on the wire:
        wire = b"".join(p if isinstance(p, bytes) else p.read() for p in parts)
    assert int.from_bytes(wire[:4], "big") == len(wire) - 4
    corr, decoded = decode_response(1, 11, wire[4:])
    assert corr == 5
    p0, p1 = decoded["responses"][0]["partitions"]
    assert p0["records"] == (b"0123456789" * 1000)[10:2010] + (b"0123456789" * 3)
    assert p1["records"] == b"0123456789" * 3


def test_frame_decoder_reassembles_frames_split_anywhere():
    frames = [b"", b"a", b"hello" * 100, bytes(range(256))]
    stream = b"".join(len(f).to_bytes(4, "big") + f for f in frames)
    for step in (1, 3, 7, 64, len(stream)):
        d = FrameDecoder(max_frame_bytes=10_000)
        out = []
        for i in range(0, len(stream), step):
            out += d.feed(stream[i : i + step])
        assert out == frames
        assert d.buffered == 0


def test_frame_decoder_limits():
    d = FrameDecoder(max_frame_bytes=100)
    assert d.feed(h("00000064") + b"x" * 99) == []
    assert d.buffered == 103
    assert d.feed(b"x" + h("00000065")) == [b"x" * 100]
    with pytest.raises(FrameTooLarge):
        d.feed(b"")
    with pytest.raises(FrameTooLarge):
        d.feed(b"more")  # the stream is out of sync for good

    with pytest.raises(FrameTooLarge):
        FrameDecoder(100).feed(h("ffffffff"))
    # The size is checked before any body is buffered.
    with pytest.raises(FrameTooLarge):
        FrameDecoder(100).feed(h("7fffffff"))
    assert issubclass(FrameTooLarge, DecodeError)


def test_frame_decoder_accepts_memoryview_and_bytearray():
    d = FrameDecoder(100)
    assert d.feed(memoryview(h("00000002 6162 0000"))) == [b"ab"]
    assert d.feed(bytearray(h("0001 63"))) == [b"c"]
