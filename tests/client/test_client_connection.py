"""BrokerConnection: version negotiation (against the broker and a scripted peer), pipelining."""

from __future__ import annotations

import socket
import struct
import threading

import pytest

from broker.client.connection import CLIENT_VERSIONS, BrokerConnection
from broker.processes import free_port
from broker.protocol.apis import API_VERSIONS, FETCH, METADATA, PRODUCE
from broker.protocol.errors import NetworkError, RequestTimedOutError, UnsupportedVersionError
from broker.protocol.framing import decode_request, encode_api_versions_error, encode_response


def test_negotiates_with_the_broker(broker):
    host, port = broker.bootstrap.split(":")
    with BrokerConnection(host, int(port)) as conn:
        assert conn.versions[PRODUCE] == (0, 8)  # as advertised (docs/contracts/wire-protocol.md)
        assert conn.version_for(PRODUCE) == 8
        assert conn.version_for(FETCH) == 11
        assert conn.version_for(METADATA) == 8


def test_pipelined_requests_are_answered_in_order(broker):
    host, port = broker.bootstrap.split(":")
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

    def __init__(self, answer):
        self.answer = answer
        self.requests: list = []
        self.server = socket.create_server(("127.0.0.1", free_port()))
        self.port = self.server.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        conn, _ = self.server.accept()
        with conn:
            while True:
                head = conn.recv(4, socket.MSG_WAITALL)
                if len(head) < 4:
                    return
                (size,) = struct.unpack(">i", head)
                frame = conn.recv(size, socket.MSG_WAITALL)
                header, body = decode_request(frame)
                self.requests.append(header)
                parts = self.answer(header, body)
                if parts is not None:
                    conn.sendall(b"".join(parts))

    def close(self):
        self.server.close()


def test_falls_back_to_the_ranges_of_a_v0_error_answer():
    ranges = {API_VERSIONS: (0, 2), METADATA: (0, 5), FETCH: (4, 6)}

    def answer(header, body):
        if header.api_version > 2:
            return encode_api_versions_error(header.correlation_id, ranges)
        raise AssertionError("the client should use the ranges it was given")

    peer = ScriptedBroker(answer)
    try:
        with BrokerConnection("127.0.0.1", peer.port, timeout_s=5) as conn:
            assert conn.versions == ranges
            assert conn.version_for(METADATA) == 5
            assert conn.version_for(FETCH) == 6
            with pytest.raises(UnsupportedVersionError, match="Produce"):
                conn.version_for(PRODUCE)
        assert [h.api_version for h in peer.requests] == [3]
    finally:
        peer.close()


def test_retries_v0_when_the_error_answer_lists_nothing():
    def answer(header, body):
        if header.api_version == 3:
            return encode_api_versions_error(header.correlation_id, {})
        keys = [
            {"api_key": k, "min_version": lo, "max_version": hi}
            for k, (lo, hi) in CLIENT_VERSIONS.items()
        ]
        return encode_response(
            API_VERSIONS, 0, header.correlation_id, {"error_code": 0, "api_keys": keys}
        )

    peer = ScriptedBroker(answer)
    try:
        with BrokerConnection("127.0.0.1", peer.port, timeout_s=5) as conn:
            assert conn.version_for(FETCH) == CLIENT_VERSIONS[FETCH][1]
        assert [h.api_version for h in peer.requests] == [3, 0]
    finally:
        peer.close()


def test_no_common_version_is_a_clear_error():
    def answer(header, body):
        return encode_api_versions_error(
            header.correlation_id, {API_VERSIONS: (0, 3), FETCH: (12, 16)}
        )

    peer = ScriptedBroker(answer)
    try:
        with BrokerConnection("127.0.0.1", peer.port, timeout_s=5) as conn:
            with pytest.raises(UnsupportedVersionError, match=r"Fetch: broker .* speaks v12-16"):
                conn.version_for(FETCH)
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


def test_large_frames_are_read_whole(broker):
    """A multi-megabyte fetch answer arrives in many recv calls into one buffer."""
    from broker.client.producer import Producer
    from broker.client.simple_consumer import SimpleConsumer

    with Producer(broker.bootstrap) as producer:
        for i in range(300):
            producer.send("large-frames", bytes([i % 256]) * 20_000, partition=0)
    with SimpleConsumer(broker.bootstrap) as consumer:
        result = consumer.fetch("large-frames", 0, 0, max_bytes=64 * 1024 * 1024)
        values = [r.value for r in result.records()]
    assert len(values) == 300
    assert all(v == bytes([i % 256]) * 20_000 for i, v in enumerate(values))


def test_bootstrap_skips_dead_servers_and_parses_lists(broker):
    from broker.client.cluster import ClusterMetadata, parse_bootstrap

    assert parse_bootstrap("a:1, PLAINTEXT://b:2") == [("a", 1), ("b", 2)]
    assert parse_bootstrap(["[::1]:9092"]) == [("::1", 9092)]
    with pytest.raises(ValueError):
        parse_bootstrap("no-port")
    dead = f"127.0.0.1:{free_port()}"
    with ClusterMetadata([dead, broker.bootstrap], timeout_s=5) as cluster:
        assert cluster.controller_id in cluster.brokers
        node = cluster.controller_id
        conn = cluster.connection(node)
        assert cluster.connection(node) is conn  # cached
        cluster.drop_connection(node)
        assert cluster.connection(node) is not conn
