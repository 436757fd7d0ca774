"""The client's side of a connection without a socket (broker/protocol/client_connection.py):
request frames out, response bytes pushed in whole, in pieces and several at once."""

from __future__ import annotations

import struct

import pytest

from broker.protocol.apis import API_VERSIONS, INIT_PRODUCER_ID, METADATA, PRODUCE
from broker.protocol.client_connection import ClientConnection
from broker.protocol.errors import ErrorCode, NetworkError
from broker.protocol.framing import decode_request, encode_api_versions_error, encode_response
from broker.protocol.types import EncodeError

METADATA_BODY = {"topics": [], "allow_auto_topic_creation": False}
API_VERSIONS_BODY = {"client_software_name": "t", "client_software_version": "1"}
INIT_BODY = {"transactional_id": None, "transaction_timeout_ms": 60000}


def metadata_answer(correlation_id: int, cluster_id: str, version: int = 8) -> bytes:
    body = {"brokers": [], "topics": [], "cluster_id": cluster_id, "controller_id": -1}
    return b"".join(encode_response(METADATA, version, correlation_id, body))


def init_answer(correlation_id: int, producer_id: int) -> bytes:
    body = {"error_code": 0, "producer_id": producer_id, "producer_epoch": 0}
    return b"".join(encode_response(INIT_PRODUCER_ID, 1, correlation_id, body))


def pipelined(n: int) -> tuple[ClientConnection, list[int]]:
    conn = ClientConnection("b1:9092", "me")
    cids = [conn.send_request(METADATA, 8, METADATA_BODY, f"r{i}")[0] for i in range(n)]
    return conn, cids


def responses(conn: ClientConnection) -> list[tuple[str, str]]:
    out = []
    while (response := conn.next_response()) is not None:
        out.append((response.request.token, response.body["cluster_id"]))
    return out


def test_a_request_frame_carries_its_header_and_body_and_ids_count_up():
    conn = ClientConnection("b1:9092", "me")
    assert conn.next_correlation_id == 0
    cid, frame = conn.send_request(METADATA, 8, METADATA_BODY, "token")
    assert cid == 0 and conn.next_correlation_id == 1
    (size,) = struct.unpack_from(">i", frame)
    assert size == len(frame) - 4
    header, body = decode_request(frame[4:])
    assert (header.api_key, header.api_version, header.correlation_id) == (METADATA, 8, 0)
    assert header.client_id == "me" and body["topics"] == []
    assert conn.send_request(METADATA, 8, METADATA_BODY)[0] == 1
    assert [(r.correlation_id, r.token) for r in conn.in_flight] == [(0, "token"), (1, None)]
    assert len(conn) == 2


def test_answers_come_out_in_order_with_their_tokens():
    conn, cids = pipelined(3)
    conn.receive_data(b"".join(metadata_answer(cid, f"c{cid}") for cid in cids))
    assert responses(conn) == [("r0", "c0"), ("r1", "c1"), ("r2", "c2")]
    assert len(conn) == 0 and conn.next_response() is None


def test_a_frame_in_pieces_is_answered_once_complete():
    conn, (cid,) = pipelined(1)
    data = metadata_answer(cid, "pieces")
    for i in range(len(data) - 1):
        conn.receive_data(data[i : i + 1])
        assert conn.next_response() is None
    conn.receive_data(data[-1:])
    assert responses(conn) == [("r0", "pieces")]


def test_a_chunk_may_end_inside_the_next_frame():
    conn, cids = pipelined(2)
    data = metadata_answer(cids[0], "a") + metadata_answer(cids[1], "b")
    cut = len(data) - 5
    conn.receive_data(data[:cut])
    assert responses(conn) == [("r0", "a")]
    conn.receive_data(data[cut:])
    assert responses(conn) == [("r1", "b")]


def test_an_answer_out_of_order_is_a_network_error_after_the_good_ones():
    conn, cids = pipelined(3)
    conn.receive_data(metadata_answer(cids[0], "a") + metadata_answer(cids[2], "c"))
    assert conn.next_response().request.token == "r0"
    with pytest.raises(NetworkError, match=r"answered correlation id 2, expected 1 .*out of order"):
        conn.next_response()
    # Nothing is taken for the frame that did not fit: every request waiting is drained.
    assert conn.drain() == ["r1", "r2"]
    assert len(conn) == 0


def test_a_response_to_no_request_and_an_undecodable_one_are_network_errors():
    conn = ClientConnection("b1:9092", "me")
    conn.receive_data(metadata_answer(0, "stray"))
    with pytest.raises(NetworkError, match="response to no request"):
        conn.next_response()
    conn, (cid,) = pipelined(1)
    with pytest.raises(NetworkError, match="undecodable Metadata v8 response from b1:9092"):
        conn.receive_frame(metadata_answer(cid, "cut")[4:-3])
    assert len(conn) == 1


def test_a_frame_size_out_of_bounds_breaks_the_stream():
    conn = ClientConnection("b1:9092", "me", max_frame_bytes=1024)
    conn.send_request(METADATA, 8, METADATA_BODY)
    conn.receive_data(struct.pack(">i", 2048))
    with pytest.raises(NetworkError, match="bad frame from b1:9092: .*2048"):
        conn.next_response()
    conn.receive_data(metadata_answer(0, "late"))  # the stream stays broken
    with pytest.raises(NetworkError, match="bad frame"):
        conn.next_response()


def test_a_bad_frame_size_after_good_frames_is_raised_once_they_are_out():
    conn, cids = pipelined(2)
    conn.receive_data(metadata_answer(cids[0], "a") + struct.pack(">i", -1))
    assert conn.next_response().request.token == "r0"
    with pytest.raises(NetworkError, match="bad frame"):
        conn.next_response()
    assert conn.drain() == ["r1"]


def test_a_request_without_answer_uses_an_id_and_waits_for_nothing():
    conn = ClientConnection("b1:9092", "me")
    body = {"transactional_id": None, "acks": 0, "timeout_ms": 1000, "topic_data": []}
    cid, frame = conn.send_request(PRODUCE, 8, body, expect_response=False)
    assert cid == 0 and frame and len(conn) == 0
    assert conn.send_request(METADATA, 8, METADATA_BODY)[0] == 1


def test_a_body_that_does_not_encode_leaves_nothing_behind():
    conn = ClientConnection("b1:9092", "me")
    with pytest.raises(EncodeError):
        conn.send_request(METADATA, 99, METADATA_BODY)
    assert conn.next_correlation_id == 0 and len(conn) == 0


def test_ids_wrap_to_zero_after_the_largest_int32():
    conn = ClientConnection("b1:9092", "me")
    conn._next_id = 0x7FFFFFFF
    cid, _ = conn.send_request(INIT_PRODUCER_ID, 1, INIT_BODY)
    assert cid == 0x7FFFFFFF and conn.next_correlation_id == 0
    conn.receive_data(init_answer(cid, 7))
    assert conn.next_response().body["producer_id"] == 7


def test_an_api_versions_refusal_is_read_as_a_v0_body():
    """Kafka refuses an ApiVersions version with a v0 body listing the range it speaks."""
    conn = ClientConnection("b1:9092", "me")
    cid, _ = conn.send_request(API_VERSIONS, 3, API_VERSIONS_BODY)
    conn.receive_data(b"".join(encode_api_versions_error(cid, {API_VERSIONS: (0, 2)})))
    body = conn.next_response().body
    assert body["error_code"] == ErrorCode.UNSUPPORTED_VERSION
    assert body["api_keys"] == [{"api_key": API_VERSIONS, "min_version": 0, "max_version": 2}]


def test_an_undecodable_api_versions_refusal_keeps_its_error_code():
    """librdkafka's mock cluster refuses with a body of no version: the code right after
    the correlation id is all it surely says."""
    conn = ClientConnection("b1:9092", "me")
    cid, _ = conn.send_request(API_VERSIONS, 3, API_VERSIONS_BODY)
    junk = struct.pack(">ihbi", cid, ErrorCode.UNSUPPORTED_VERSION, 1, 0x00120000)
    conn.receive_data(struct.pack(">i", len(junk)) + junk)
    assert conn.next_response().body == {"error_code": 35, "api_keys": []}
    # A successful answer that does not decode is a broken stream, as for every API.
    cid, _ = conn.send_request(API_VERSIONS, 3, API_VERSIONS_BODY)
    junk = struct.pack(">ihbi", cid, 0, 1, 0x00120000)
    with pytest.raises(NetworkError, match="undecodable ApiVersions v3"):
        conn.receive_frame(junk)
