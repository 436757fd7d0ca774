"""Bad input costs the offender its request or its connection, never anyone else's service.

A well-behaved kafka-python producer and consumer run in a thread throughout; at the end
every record it sent must be there exactly once.
"""

from __future__ import annotations

import os
import socket
import struct
import threading
import time

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic

from broker.protocol.apis import API_VERSIONS, PRODUCE
from broker.protocol.errors import ErrorCode
from broker.protocol.framing import decode_response, encode_request
from broker.records.batch import build_batch
from tests.helpers.wire import recv_exact

MAX_REQUEST = 1024 * 1024


def _roundtrip(
    port: int, api_key: int, version: int, body: dict, response_version: int | None = None
) -> dict:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(encode_request(api_key, version, 7, "bad-input-test", body))
        (size,) = struct.unpack(">i", recv_exact(s, 4))
        cid, resp = decode_response(
            api_key, version if response_version is None else response_version, recv_exact(s, size)
        )
        assert cid == 7
        return resp


def _closed_after(port: int, payload: bytes) -> bool:
    """Send payload; True when the broker closes the connection without answering."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(payload)
        try:
            s.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        try:
            return s.recv(4096) == b""
        except ConnectionResetError:
            return True


def _produce_body(topic: str, records: bytes) -> dict:
    return {
        "transactional_id": None,
        "acks": 1,
        "timeout_ms": 5000,
        "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": records}]}],
    }


def _produce_code(port: int, records: bytes, version: int = 8) -> int:
    resp = _roundtrip(port, PRODUCE, version, _produce_body("bad-target", records))
    return resp["responses"][0]["partition_responses"][0]["error_code"]


class GoodClient(threading.Thread):
    def __init__(self, bootstrap: str) -> None:
        super().__init__(daemon=True)
        self.bootstrap = bootstrap
        self.stop = threading.Event()
        self.sent = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            producer = KafkaProducer(bootstrap_servers=self.bootstrap, linger_ms=1)
            while not self.stop.is_set():
                producer.send("good-traffic", value=f"good-{self.sent}".encode(), partition=0).get(
                    timeout=10
                )
                self.sent += 1
            producer.close()
        except BaseException as exc:  # surfaced by the test
            self.error = exc


@pytest.fixture
def noisy(broker_factory):
    b = broker_factory(
        {"socket.request.max.bytes": str(MAX_REQUEST), "message.max.bytes": "500000"}
    )
    admin = KafkaAdminClient(bootstrap_servers=b.bootstrap)
    admin.create_topics([NewTopic("bad-target", num_partitions=1, replication_factor=1)])
    admin.close()
    _roundtrip(
        b.port, PRODUCE, 8, _produce_body("bad-target", build_batch([(None, b"seed", 0, [])]))
    )
    good = GoodClient(b.bootstrap)
    good.start()
    deadline = time.monotonic() + 20
    while good.sent == 0 and good.error is None and time.monotonic() < deadline:
        time.sleep(0.05)
    yield b
    good.stop.set()
    good.join(30)
    assert good.error is None, good.error
    assert good.sent > 0
    consumer = KafkaConsumer(bootstrap_servers=b.bootstrap, consumer_timeout_ms=3000)
    consumer.assign([TopicPartition("good-traffic", 0)])
    consumer.seek_to_beginning()
    values = [m.value.decode() for m in consumer]
    consumer.close()
    assert values == [f"good-{i}" for i in range(good.sent)]


def test_garbage_and_broken_frames_close_only_that_connection(noisy):
    port = noisy.port
    rng = os.urandom
    for _ in range(20):
        _closed_after(port, rng(64))
    # A frame whose header is fine but whose body is cut short.
    frame = encode_request(
        PRODUCE, 8, 1, "x", _produce_body("bad-target", build_batch([(None, b"v", 0, [])]))
    )
    assert _closed_after(port, struct.pack(">i", len(frame) - 4) + frame[4:40])
    # A complete frame whose body lies about its array length.
    # size, api key, version, correlation id, client id "x", transactional id, acks, timeout:
    topic_count_at = 4 + 2 + 2 + 4 + (2 + 1) + 2 + 2 + 4
    broken = bytearray(frame)
    struct.pack_into(">i", broken, topic_count_at, 0x7FFFFFFF)
    assert _closed_after(port, bytes(broken))
    # Unknown API key.
    assert _closed_after(port, struct.pack(">ihhih", 10, 999, 0, 1, -1))
    # A frame over socket.request.max.bytes: closed before the broker buffers it.
    assert _closed_after(port, struct.pack(">i", MAX_REQUEST + 1) + b"\0" * 1024)
    # Negative size.
    assert _closed_after(port, struct.pack(">i", -5))
    time.sleep(0.5)


def test_bad_batches_get_error_codes(noisy):
    port = noisy.port
    good = bytearray(build_batch([(b"k", b"value", 1000, [])]))
    bad_crc = bytearray(good)
    bad_crc[-1] ^= 0xFF
    assert _produce_code(port, bytes(bad_crc)) == ErrorCode.CORRUPT_MESSAGE
    # A magic 0/1 message set.
    legacy = bytearray(good)
    legacy[16] = 1
    assert _produce_code(port, bytes(legacy)) in (
        ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT,
        ErrorCode.INVALID_RECORD,
        ErrorCode.CORRUPT_MESSAGE,
    )
    # Truncated batch.
    assert _produce_code(port, bytes(good[:-3])) == ErrorCode.CORRUPT_MESSAGE
    # Larger than message.max.bytes.
    huge = build_batch([(None, os.urandom(600_000), 0, [])])
    assert _produce_code(port, huge) == ErrorCode.MESSAGE_TOO_LARGE
    # Produce v0-v2 are advertised (for librdkafka's feature probes) but refused.
    assert _produce_code(port, bytes(good), version=2) == ErrorCode.UNSUPPORTED_VERSION
    # The good batch still goes in after all that.
    assert _produce_code(port, bytes(good)) == ErrorCode.NONE


def test_unsupported_api_versions_version_answers_v0_with_ranges(noisy):
    # Hand-build an ApiVersions v9 request: header v2 (flexible), empty tagged fields.
    with socket.create_connection(("127.0.0.1", noisy.port), timeout=10) as s:
        body = struct.pack(">hhih", API_VERSIONS, 9, 42, 4) + b"test" + b"\0" + b"\0"
        s.sendall(struct.pack(">i", len(body)) + body)
        (size,) = struct.unpack(">i", recv_exact(s, 4))
        cid, resp = decode_response(API_VERSIONS, 0, recv_exact(s, size))
    assert cid == 42
    assert resp["error_code"] == ErrorCode.UNSUPPORTED_VERSION
    ranges = {k["api_key"]: (k["min_version"], k["max_version"]) for k in resp["api_keys"]}
    assert ranges[API_VERSIONS] == (0, 3)


def test_unsupported_api_versions_answer_lists_api_versions_alone(noisy):
    """A client must not take the ranges of this answer for the broker's: against Kafka
    they would say the broker speaks nothing else (ours listed them all, so a client
    that trusted them worked here and nowhere else)."""
    with socket.create_connection(("127.0.0.1", noisy.port), timeout=10) as s:
        body = struct.pack(">hhih", API_VERSIONS, 9, 43, 4) + b"test" + b"\0" + b"\0"
        s.sendall(struct.pack(">i", len(body)) + body)
        (size,) = struct.unpack(">i", recv_exact(s, 4))
        _, resp = decode_response(API_VERSIONS, 0, recv_exact(s, size))
    ranges = {k["api_key"]: (k["min_version"], k["max_version"]) for k in resp["api_keys"]}
    assert ranges == {API_VERSIONS: (0, 3)}
