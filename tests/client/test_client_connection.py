"""BrokerConnection: version negotiation (against our broker, librdkafka's mock cluster and
a scripted peer), every common version of each request, pipelining."""

from __future__ import annotations

import socket
import struct
import threading

import pytest

from broker.client.cluster import ClusterMetadata, parse_bootstrap
from broker.client.connection import CLIENT_VERSIONS, BrokerConnection
from broker.processes import free_port
from broker.protocol.apis import (
    API_VERSIONS,
    FETCH,
    INIT_PRODUCER_ID,
    LIST_OFFSETS,
    METADATA,
    PRODUCE,
)
from broker.protocol.errors import (
    ErrorCode,
    NetworkError,
    RequestTimedOutError,
    UnsupportedVersionError,
)
from broker.protocol.framing import decode_request, encode_api_versions_error, encode_response
from broker.records.batch import build_batch, iter_records
from tests.helpers.wire import recv_exact


def produce_body(topic: str, partition: int, batch: bytes) -> dict:
    data = [{"name": topic, "partition_data": [{"index": partition, "records": batch}]}]
    return {"transactional_id": None, "acks": -1, "timeout_ms": 5000, "topic_data": data}


def fetch_body(topic: str, partition: int, offset: int, epoch: int = -1) -> dict:
    part = {
        "partition": partition,
        "current_leader_epoch": epoch,
        "fetch_offset": offset,
        "log_start_offset": -1,
        "partition_max_bytes": 1 << 20,
    }
    return {
        "replica_id": -1,
        "max_wait_ms": 0,
        "min_bytes": 0,
        "max_bytes": 1 << 20,
        "isolation_level": 0,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [{"topic": topic, "partitions": [part]}],
        "forgotten_topics_data": [],
        "rack_id": "",
    }


def list_offsets_body(topic: str, partition: int, timestamp: int, epoch: int = -1) -> dict:
    part = {"partition_index": partition, "current_leader_epoch": epoch, "timestamp": timestamp}
    return {
        "replica_id": -1,
        "isolation_level": 0,
        "topics": [{"name": topic, "partitions": [part]}],
    }


def test_negotiates_the_highest_common_versions(kafka):
    host, port = kafka.bootstrap.split(",")[0].split(":")
    with BrokerConnection(host, int(port)) as conn:
        for api_key, (_, ours) in CLIENT_VERSIONS.items():
            if api_key in conn.versions:
                assert conn.version_for(api_key) == min(ours, conn.versions[api_key][1])
        if kafka.kind == "ours":
            # as advertised (docs/contracts/wire-protocol.md)
            assert conn.versions[PRODUCE] == (0, 12)
            assert conn.versions[API_VERSIONS] == (0, 3)
        assert conn.version_for(PRODUCE) == 8
        assert conn.version_for(FETCH) == 11
        assert conn.version_for(METADATA) == 8


def test_every_version_both_sides_speak_is_understood(kafka):
    """Each request at each common version, answered and decoded: our codec against
    our broker's and against an independent implementation's."""
    topic = kafka.new_topic()
    with ClusterMetadata(kafka.bootstrap, timeout_s=10) as cluster:
        cluster.refresh([topic])
        conn = cluster.connection(cluster.leader_for(topic, 0))

        def versions(api_key: int) -> range:
            lowest = max(CLIENT_VERSIONS[api_key][0], conn.versions[api_key][0])
            return range(lowest, conn.version_for(api_key) + 1)

        def ask(api_key: int, body: dict, version: int) -> dict | None:
            """The answer, or None where the mock is known to answer off the spec."""
            nonlocal conn
            if kafka.deviation(api_key, version) is None:
                return conn.request(api_key, body, version)
            with pytest.raises(NetworkError, match="undecodable"):
                conn.request(api_key, body, version)
            conn = cluster.connection(cluster.leader_for(topic, 0))  # the old one is closed
            return None

        for v in versions(API_VERSIONS):
            body = {"client_software_name": "t", "client_software_version": "1"}
            assert ask(API_VERSIONS, body, v)["error_code"] == 0, v
        for v in versions(METADATA):
            body = {"topics": [{"name": topic}], "allow_auto_topic_creation": False}
            (answer,) = ask(METADATA, body, v)["topics"]
            assert (answer["name"], answer["error_code"]) == (topic, 0), v
            assert [p["partition_index"] for p in answer["partitions"]][:1] == [0], v
        for v in versions(INIT_PRODUCER_ID):
            body = {"transactional_id": None, "transaction_timeout_ms": 60000}
            assert ask(INIT_PRODUCER_ID, body, v)["error_code"] == 0, v
        produced = 0
        for v in versions(PRODUCE):
            batch = build_batch([(b"k", b"v%d" % v, 1_700_000_000_000 + v, [("h", b"x")])])
            body = produce_body(topic, 0, batch)
            answer = ask(PRODUCE, body, v)
            if answer is not None:
                (part,) = answer["responses"][0]["partition_responses"]
                assert (part["error_code"], part["base_offset"]) == (0, produced), v
            produced += 1  # appended even where the answer could not be read
        for v in versions(LIST_OFFSETS):
            body = list_offsets_body(topic, 0, -1)
            (answer,) = ask(LIST_OFFSETS, body, v)["topics"][0]["partitions"]
            assert (answer["error_code"], answer["offset"]) == (0, produced), v
        for v in versions(FETCH):
            body = fetch_body(topic, 0, 0)
            (answer,) = ask(FETCH, body, v)["responses"][0]["partitions"]
            assert (answer["error_code"], answer["high_watermark"]) == (0, produced), v
            first = next(iter_records(answer["records"]))
            assert (first.key, first.headers) == (b"k", [("h", b"x")]), v


def test_pipelined_requests_are_answered_in_order(kafka):
    host, port = kafka.bootstrap.split(",")[0].split(":")
    with BrokerConnection(host, int(port)) as conn:
        ids = [
            conn.send(METADATA, {"topics": [], "allow_auto_topic_creation": False})
            for _ in range(5)
        ]
        ids.append(
            conn.send(API_VERSIONS, {"client_software_name": "t", "client_software_version": "1"})
        )
        # Ask for the last first: the earlier answers are read and kept on the way.
        assert conn.receive(ids[-1])["error_code"] == 0
        for cid in ids[:-1]:
            assert conn.receive(cid)["brokers"]
        with pytest.raises(ValueError):
            conn.receive(ids[0])


class ScriptedBroker:
    """A peer that answers each request frame with `answer(header, body) -> parts|None`."""

    def __init__(self, answer, tls=None):
        """`tls`: an ssl.SSLContext to serve TLS with."""
        self.answer = answer
        self.tls = tls
        self.requests: list = []
        self.server = socket.create_server(("127.0.0.1", free_port()))
        self.port = self.server.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        conn, _ = self.server.accept()
        if self.tls is not None:
            try:
                conn = self.tls.wrap_socket(conn, server_side=True)
            except OSError:  # the client refused our certificate
                conn.close()
                return
        with conn:
            while True:
                try:
                    (size,) = struct.unpack(">i", recv_exact(conn, 4))
                    frame = recv_exact(conn, size)
                except ConnectionError:  # the client closed the connection
                    return
                header, body = decode_request(frame)
                self.requests.append(header)
                parts = self.answer(header, body)
                if parts is not None:
                    conn.sendall(b"".join(parts))

    def close(self):
        self.server.close()


def api_versions_answer(header, ranges: dict[int, tuple[int, int]]) -> list:
    """A successful ApiVersions answer at the version asked."""
    keys = [{"api_key": k, "min_version": lo, "max_version": hi} for k, (lo, hi) in ranges.items()]
    return encode_response(
        API_VERSIONS, header.api_version, header.correlation_id, {"error_code": 0, "api_keys": keys}
    )


OUR_RANGES = dict(CLIENT_VERSIONS)


def test_retries_at_the_api_versions_version_an_error_answer_names():
    """Kafka answers a version it does not speak with UNSUPPORTED_VERSION in a v0 body
    listing the ApiVersions range; the client asks again at its top, and takes the
    broker's ranges from that answer only (the error answer lists ApiVersions alone)."""

    def answer(header, body):
        if header.api_version > 1:
            return encode_api_versions_error(header.correlation_id, {API_VERSIONS: (0, 1)})
        return api_versions_answer(header, OUR_RANGES)

    peer = ScriptedBroker(answer)
    try:
        with BrokerConnection("127.0.0.1", peer.port, timeout_s=5) as conn:
            assert conn.versions == OUR_RANGES
            assert conn.version_for(FETCH) == CLIENT_VERSIONS[FETCH][1]
        assert [h.api_version for h in peer.requests] == [3, 1]
    finally:
        peer.close()


def test_an_undecodable_refusal_steps_down_one_version_at_a_time():
    """librdkafka's mock cluster refuses ApiVersions v3 with a body that decodes as no
    version; the client keeps the error code (right after the correlation id) and
    tries the next version down, to v0."""

    def answer(header, body):
        if header.api_version > 0:
            junk = struct.pack(">ihbi", header.correlation_id, 35, 1, 0x00120000)
            return [struct.pack(">i", len(junk)), junk]
        return api_versions_answer(header, OUR_RANGES)

    peer = ScriptedBroker(answer)
    try:
        with BrokerConnection("127.0.0.1", peer.port, timeout_s=5) as conn:
            assert conn.version_for(PRODUCE) == CLIENT_VERSIONS[PRODUCE][1]
        assert [h.api_version for h in peer.requests] == [3, 2, 1, 0]
    finally:
        peer.close()


def test_refusing_every_api_versions_version_is_a_clear_error():
    def answer(header, body):
        return encode_api_versions_error(header.correlation_id, {API_VERSIONS: (0, 3)})

    peer = ScriptedBroker(answer)
    try:
        with pytest.raises(UnsupportedVersionError, match="refused ApiVersions v0-3"):
            BrokerConnection("127.0.0.1", peer.port, timeout_s=5)
        assert [h.api_version for h in peer.requests] == [3, 2, 1, 0]
    finally:
        peer.close()


def test_no_common_version_is_a_clear_error():
    peer = ScriptedBroker(
        lambda header, body: api_versions_answer(header, {API_VERSIONS: (0, 3), FETCH: (12, 16)})
    )
    try:
        with BrokerConnection("127.0.0.1", peer.port, timeout_s=5) as conn:
            with pytest.raises(UnsupportedVersionError, match=r"Fetch: broker .* speaks v12-16"):
                conn.version_for(FETCH)
            with pytest.raises(UnsupportedVersionError, match="does not offer Produce"):
                conn.version_for(PRODUCE)
    finally:
        peer.close()


INIT_BODY = {"transactional_id": None, "transaction_timeout_ms": 60000}


def test_a_version_refused_although_advertised_is_retried_lower():
    """A broker may advertise a version and then answer it UNSUPPORTED_VERSION: the
    request goes again one version lower, as do later requests of that API; answers
    of requests pipelined behind it are kept for their callers."""

    def answer(header, body):
        if header.api_key == API_VERSIONS:
            return api_versions_answer(header, {**OUR_RANGES, INIT_PRODUCER_ID: (0, 1)})
        if header.api_key == METADATA:
            return encode_response(
                METADATA, header.api_version, header.correlation_id, {"brokers": [], "topics": []}
            )
        error = ErrorCode.UNSUPPORTED_VERSION if header.api_version > 0 else ErrorCode.NONE
        return encode_response(
            INIT_PRODUCER_ID,
            header.api_version,
            header.correlation_id,
            {"error_code": error, "producer_id": 7, "producer_epoch": 0},
        )

    peer = ScriptedBroker(answer)
    try:
        with BrokerConnection("127.0.0.1", peer.port, timeout_s=5) as conn:
            assert conn.version_for(INIT_PRODUCER_ID) == 1
            refused = conn.send(INIT_PRODUCER_ID, INIT_BODY)
            behind = conn.send(METADATA, {"topics": [], "allow_auto_topic_creation": False})
            assert conn.receive(behind)["brokers"] == []
            assert conn.receive(refused)["producer_id"] == 7
            assert conn.version_for(INIT_PRODUCER_ID) == 0
            assert conn.request(INIT_PRODUCER_ID, INIT_BODY)["producer_id"] == 7
        versions = [h.api_version for h in peer.requests if h.api_key == INIT_PRODUCER_ID]
        assert versions == [1, 0, 0]
    finally:
        peer.close()


def test_a_refusal_at_the_lowest_common_version_reaches_the_caller():
    def answer(header, body):
        if header.api_key == API_VERSIONS:
            return api_versions_answer(header, {**OUR_RANGES, INIT_PRODUCER_ID: (0, 1)})
        return encode_response(
            INIT_PRODUCER_ID,
            header.api_version,
            header.correlation_id,
            {"error_code": ErrorCode.UNSUPPORTED_VERSION, "producer_id": -1, "producer_epoch": -1},
        )

    peer = ScriptedBroker(answer)
    try:
        with BrokerConnection("127.0.0.1", peer.port, timeout_s=5) as conn:
            assert conn.request(INIT_PRODUCER_ID, INIT_BODY)["error_code"] == 35
            with pytest.raises(UnsupportedVersionError, match="refused v0"):
                conn.version_for(INIT_PRODUCER_ID)
        assert [h.api_version for h in peer.requests][1:] == [1, 0]
    finally:
        peer.close()


def test_a_refused_version_the_caller_chose_leaves_the_ceiling_alone(broker):
    """Our broker advertises Produce v0-8 and refuses v0-2 (kept for librdkafka's
    feature probes); a caller asking v2 itself gets the refusal, later requests v8."""
    host, port = broker.bootstrap.split(":")
    batch = build_batch([(None, b"v", 0, [])])
    body = {
        "transactional_id": None,
        "acks": -1,
        "timeout_ms": 1000,
        "topic_data": [{"name": "ceiling", "partition_data": [{"index": 0, "records": batch}]}],
    }
    with BrokerConnection(host, int(port)) as conn:
        (topic,) = conn.request(PRODUCE, body, 2)["responses"]
        assert topic["partition_responses"][0]["error_code"] == ErrorCode.UNSUPPORTED_VERSION
        assert conn.refused == {} and conn.version_for(PRODUCE) == 8


def test_produce_refused_in_every_partition_is_retried_lower():
    """Answers without a request-level error code refuse a version in every item."""

    def answer(header, body):
        if header.api_key == API_VERSIONS:
            return api_versions_answer(header, OUR_RANGES)
        error = ErrorCode.UNSUPPORTED_VERSION if header.api_version > 5 else ErrorCode.NONE
        partitions = [
            {"index": p["index"], "error_code": error, "base_offset": 0}
            for t in body["topic_data"]
            for p in t["partition_data"]
        ]
        response = {"responses": [{"name": "t", "partition_responses": partitions}]}
        return encode_response(PRODUCE, header.api_version, header.correlation_id, response)

    peer = ScriptedBroker(answer)
    batch = build_batch([(None, b"v", 0, [])])
    body = {
        "transactional_id": None,
        "acks": -1,
        "timeout_ms": 1000,
        "topic_data": [
            {
                "name": "t",
                "partition_data": [{"index": 0, "records": batch}, {"index": 1, "records": batch}],
            }
        ],
    }
    try:
        with BrokerConnection("127.0.0.1", peer.port, timeout_s=5) as conn:
            (topic,) = conn.request(PRODUCE, body)["responses"]
            assert [p["error_code"] for p in topic["partition_responses"]] == [0, 0]
        assert [h.api_version for h in peer.requests][1:] == [8, 7, 6, 5]
    finally:
        peer.close()


def test_silent_peer_times_out_and_closed_port_refuses():
    peer = ScriptedBroker(lambda header, body: None)
    try:
        with pytest.raises(RequestTimedOutError):
            BrokerConnection("127.0.0.1", peer.port, timeout_s=0.5)
    finally:
        peer.close()
    with pytest.raises(NetworkError, match="cannot connect"):
        BrokerConnection("127.0.0.1", free_port(), timeout_s=2)


def test_large_frames_are_read_whole(kafka):
    """A multi-megabyte fetch answer arrives in many recv calls into one buffer.

    4 MB: the mock keeps only the newest 5 MiB of a partition."""
    from broker.client.producer import Producer
    from broker.client.simple_consumer import SimpleConsumer

    topic = kafka.new_topic()
    with Producer(kafka.bootstrap) as producer:
        for i in range(200):
            producer.send(topic, bytes([i % 256]) * 20_000, partition=0)
    values = []
    with SimpleConsumer(kafka.bootstrap) as consumer:
        while len(values) < 200:  # one fetch on our broker; one batch per fetch on the mock
            result = consumer.fetch(topic, 0, len(values), max_bytes=64 * 1024 * 1024)
            values += [r.value for r in result.records()]
    assert len(values) == 200
    assert all(v == bytes([i % 256]) * 20_000 for i, v in enumerate(values))


def test_bootstrap_skips_dead_servers_and_parses_lists(kafka):

    assert parse_bootstrap("a:1, PLAINTEXT://b:2") == [("a", 1), ("b", 2)]
    assert parse_bootstrap(["[::1]:9092"]) == [("::1", 9092)]
    with pytest.raises(ValueError):
        parse_bootstrap("no-port")
    dead = f"127.0.0.1:{free_port()}"
    with ClusterMetadata([dead, *kafka.bootstrap.split(",")], timeout_s=5) as cluster:
        node = min(cluster.brokers)
        conn = cluster.connection(node)
        assert cluster.connection(node) is conn  # cached
        cluster.drop_connection(node)
        assert cluster.connection(node) is not conn


def test_edge_requests_get_kafkas_error_codes(kafka):
    """Requests at the edges of the log or of the metadata: the error codes Kafka answers
    with, from our broker and from the mock alike."""
    topic = kafka.new_topic()
    with ClusterMetadata(kafka.bootstrap, timeout_s=10) as cluster:
        cluster.refresh([topic])
        conn = cluster.connection(cluster.leader_for(topic, 0))

        def produce(name: str, partition: int) -> int:
            batch = build_batch([(None, b"v", 1_700_000_000_000, [])])
            (topic_answer,) = conn.request(PRODUCE, produce_body(name, partition, batch))[
                "responses"
            ]
            return topic_answer["partition_responses"][0]["error_code"]

        def fetch(name: str, partition: int, offset: int, epoch: int = -1) -> dict:
            body = fetch_body(name, partition, offset, epoch)
            return conn.request(FETCH, body)["responses"][0]["partitions"][0]

        def list_offsets(name: str, partition: int, epoch: int = -1) -> int:
            body = list_offsets_body(name, partition, -1, epoch)
            return conn.request(LIST_OFFSETS, body)["topics"][0]["partitions"][0]["error_code"]

        missing = f"missing-{topic}"
        assert produce(topic, 0) == ErrorCode.NONE
        assert produce(topic, 99) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert produce(missing, 0) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert fetch(topic, 0, 1)["error_code"] == ErrorCode.NONE  # at the high watermark
        past = fetch(topic, 0, 2)
        assert past["error_code"] == ErrorCode.OFFSET_OUT_OF_RANGE
        assert (past["high_watermark"], past["log_start_offset"]) == (1, 0)
        assert fetch(topic, 0, -1)["error_code"] == ErrorCode.OFFSET_OUT_OF_RANGE
        assert fetch(topic, 99, 0)["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert fetch(missing, 0, 0)["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert fetch(topic, 0, 0, epoch=1000)["error_code"] == ErrorCode.UNKNOWN_LEADER_EPOCH
        assert list_offsets(topic, 99) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert list_offsets(missing, 0) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert list_offsets(topic, 0, epoch=1000) == ErrorCode.UNKNOWN_LEADER_EPOCH
