"""What the client knows about the cluster: brokers, topics, partition leaders.

Metadata requests go over a connection of their own, under a lock, so a producer's
user threads can look up partition counts while its sender thread uses the
per-broker connections handed out by `connection()`. Those per-broker connections are
not locked: each is meant to be used by one thread (the sender, or the consumer's
caller).
"""

from __future__ import annotations

import threading
import time
from typing import NamedTuple

from broker.client.connection import UNREACHABLE, BrokerConnection
from broker.client.security import SecurityConfig
from broker.cluster import Node
from broker.protocol.apis import METADATA
from broker.protocol.errors import (
    ErrorCode,
    KafkaError,
    LeaderNotAvailableError,
    NetworkError,
    UnknownTopicOrPartitionError,
    as_error_code,
)


class PartitionMetadata(NamedTuple):
    partition: int
    leader: int
    leader_epoch: int
    replicas: list[int]
    isr: list[int]
    error: ErrorCode


class TopicMetadata(NamedTuple):
    name: str
    is_internal: bool
    partitions: dict[int, PartitionMetadata]


_LEADER_POLL_S = 0.05


def _metadata_body(topics: list[str] | None, allow_auto_create: bool) -> dict:
    return {
        "topics": None if topics is None else [{"name": t} for t in topics],
        "allow_auto_topic_creation": allow_auto_create,
        "include_cluster_authorized_operations": False,
        "include_topic_authorized_operations": False,
    }


def _have_leaders(cached: dict[str, TopicMetadata], topics: list[str]) -> bool:
    return all(
        t in cached and all(p.leader >= 0 for p in cached[t].partitions.values()) for t in topics
    )


def parse_bootstrap(servers: str | list[str]) -> list[tuple[str, int]]:
    """ "host:port,host:port" or a list of "host:port" -> [(host, port)]."""
    items = servers.split(",") if isinstance(servers, str) else list(servers)
    out = []
    for item in items:
        item = item.strip()
        if not item:
            continue
        if "://" in item:  # tolerate listener syntax, PLAINTEXT://host:port
            item = item.split("://", 1)[1]
        host, sep, port = item.rpartition(":")
        if not sep or not port.isdigit():
            raise ValueError(f"bootstrap server {item!r} is not host:port")
        out.append((host.strip("[]") or "localhost", int(port)))
    if not out:
        raise ValueError("no bootstrap servers given")
    return out


class ClusterMetadata:
    """Cached cluster metadata plus one cached connection per broker."""

    def __init__(
        self,
        bootstrap_servers: str | list[str],
        client_id: str = "kafka-hourly",
        timeout_s: float = 30.0,
        security: SecurityConfig | None = None,
    ):
        self.bootstrap = parse_bootstrap(bootstrap_servers)
        self.client_id = client_id
        self.timeout_s = timeout_s
        self.security = security
        self.brokers: dict[int, Node] = {}
        self.topics: dict[str, TopicMetadata] = {}
        self.controller_id = -1
        self.cluster_id: str | None = None
        self._lock = threading.RLock()
        self._meta_conn: BrokerConnection | None = None
        self._conns: dict[int, BrokerConnection] = {}
        self.refresh()

    # --- metadata -----------------------------------------------------------------

    def refresh(
        self, topics: list[str] | None = None, allow_auto_create: bool = False
    ) -> dict[str, ErrorCode]:
        """Fetch metadata for `topics` (None: every topic) and merge it into the cache.

        Returns the topic-level error of each topic in the answer (NONE when fine).
        Topics the broker does not know are dropped from the cache.
        """
        with self._lock:
            response = self._metadata_request(topics, allow_auto_create)
            self.brokers = {
                b["node_id"]: Node(b["node_id"], b["host"], b["port"], b["rack"])
                for b in response["brokers"]
            }
            self.controller_id = response["controller_id"]
            self.cluster_id = response["cluster_id"]
            if topics is None:
                self.topics = {}
            errors: dict[str, ErrorCode] = {}
            for t in response["topics"]:
                error = as_error_code(t["error_code"])
                errors[t["name"]] = error
                if error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION or (
                    error != ErrorCode.NONE and not t["partitions"]
                ):
                    self.topics.pop(t["name"], None)
                    continue
                parts = {
                    p["partition_index"]: PartitionMetadata(
                        p["partition_index"],
                        p["leader_id"],
                        p["leader_epoch"],
                        list(p["replica_nodes"]),
                        list(p["isr_nodes"]),
                        as_error_code(p["error_code"]),
                    )
                    for p in t["partitions"]
                }
                self.topics[t["name"]] = TopicMetadata(t["name"], t["is_internal"], parts)
            return errors

    def _metadata_request(self, topics: list[str] | None, allow_auto_create: bool) -> dict:
        body = _metadata_body(topics, allow_auto_create)
        # The current metadata connection first, then every broker we know of, then
        # the bootstrap list: a restarted or moved broker must not strand the client.
        last_error: Exception | None = None
        conn = self._meta_conn
        if conn is not None and not conn.closed:
            try:
                return conn.request(METADATA, body)
            except UNREACHABLE as exc:
                last_error = exc
                conn.close()
        self._meta_conn = None
        candidates = [(b.host, b.port) for b in self.brokers.values()] + self.bootstrap
        for address in dict.fromkeys(candidates):
            try:
                conn = self.open_connection(*address)
            except UNREACHABLE as exc:
                last_error = exc
                continue
            try:
                response = conn.request(METADATA, body)
            except UNREACHABLE as exc:
                last_error = exc
                conn.close()
                continue
            self._meta_conn = conn
            return response
        raise NetworkError(f"no broker answered Metadata: {last_error}")

    def partitions_for(self, topic: str) -> list[int]:
        """The partition ids of `topic` (metadata is fetched if the topic is not cached)."""
        meta = self.topics.get(topic)
        if meta is None:
            self.refresh([topic])
            meta = self.topics.get(topic)
            if meta is None:
                raise UnknownTopicOrPartitionError(f"topic {topic!r} does not exist")
        return sorted(meta.partitions)

    def partition(self, topic: str, partition: int) -> PartitionMetadata:
        """Cached metadata of one partition, fetched once if not cached."""
        meta = self.topics.get(topic)
        if meta is None or partition not in meta.partitions:
            self.refresh([topic])
            meta = self.topics.get(topic)
            if meta is None:
                raise UnknownTopicOrPartitionError(f"topic {topic!r} does not exist")
            if partition not in meta.partitions:
                raise UnknownTopicOrPartitionError(
                    f"topic {topic!r} has no partition {partition} "
                    f"(partitions 0-{len(meta.partitions) - 1})"
                )
        return meta.partitions[partition]

    def leader_for(self, topic: str, partition: int) -> int:
        """The node id leading `topic`-`partition`; LeaderNotAvailableError while there is none."""
        leader = self.partition(topic, partition).leader
        if leader < 0 or leader not in self.brokers:
            raise LeaderNotAvailableError(f"{topic}-{partition} has no leader right now")
        return leader

    def wait_for_leaders(self, topics: list[str], timeout_s: float) -> bool:
        """Refresh until every partition of `topics` has a leader, in the answer of every
        broker; False at the deadline.

        A topic just created (or auto-created) may show no partitions or no leaders for a
        while, on our broker and on others. In a cluster each broker learns of it from the
        controller on its own, a few milliseconds apart: until the last one has, a client
        asking that broker is told the topic does not exist. So every broker is asked.
        """
        deadline = time.monotonic() + timeout_s
        while True:
            self.refresh(topics)
            if _have_leaders(self.topics, topics) and self._known_everywhere(topics):
                return True
            if time.monotonic() > deadline:
                return False
            time.sleep(_LEADER_POLL_S)

    def _known_everywhere(self, topics: list[str]) -> bool:
        """Whether every broker of the metadata answers `topics` with leaders. A broker
        that cannot be reached does not count: it learns of the topics when it is back."""
        body = _metadata_body(topics, allow_auto_create=False)
        for node_id in list(self.brokers):
            try:
                response = self.connection(node_id).request(METADATA, body)
            except UNREACHABLE:
                self.drop_connection(node_id)
                continue
            seen = {
                t["name"]: {p["partition_index"]: p["leader_id"] for p in t["partitions"]}
                for t in response["topics"]
                if t["error_code"] == ErrorCode.NONE
            }
            if not all(seen.get(t) and min(seen[t].values()) >= 0 for t in topics):
                return False
        return True

    # --- connections --------------------------------------------------------------

    def open_connection(
        self, host: str, port: int, timeout_s: float | None = None
    ) -> BrokerConnection:
        """A new connection with this client's id and security settings: every
        connection of a client starts here, so none goes out without TLS or SASL."""
        return BrokerConnection(
            host, port, self.client_id, timeout_s or self.timeout_s, self.security
        )

    def connection(self, node_id: int) -> BrokerConnection:
        """The cached connection to broker `node_id`, (re)connecting if needed."""
        with self._lock:
            info = self.brokers.get(node_id)
            if info is None:
                raise KafkaError(f"unknown broker {node_id}", ErrorCode.BROKER_NOT_AVAILABLE)
            conn = self._conns.get(node_id)
            if conn is not None and not conn.closed and (conn.host, conn.port) == info[1:3]:
                return conn
            if conn is not None:
                conn.close()
            conn = self.open_connection(info.host, info.port)
            self._conns[node_id] = conn
            return conn

    def any_connection(self) -> BrokerConnection:
        """A connection to some live broker (the controller if known), for cluster-wide calls."""
        with self._lock:
            order = sorted(self.brokers, key=lambda n: n != self.controller_id)
            last_error: Exception | None = None
            for node_id in order:
                try:
                    return self.connection(node_id)
                except UNREACHABLE as exc:
                    last_error = exc
            raise NetworkError(f"no broker reachable: {last_error}")

    def drop_connection(self, node_id: int) -> None:
        """Forget a broken connection; the next connection() reconnects."""
        with self._lock:
            conn = self._conns.pop(node_id, None)
            if conn is not None:
                conn.close()

    def close(self) -> None:
        with self._lock:
            for conn in self._conns.values():
                conn.close()
            self._conns.clear()
            if self._meta_conn is not None:
                self._meta_conn.close()
                self._meta_conn = None

    def __enter__(self) -> ClusterMetadata:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
