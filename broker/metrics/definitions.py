"""Every metric the broker counts on its hot paths, declared once (names, help, labels).

What the broker already knows as state (partitions, ISR, purgatories, groups, the
controller) is read at scrape time by `state.BrokerStateCollector`; only events are
counted here: requests and their latency phases, bytes and messages in and out, log
flushes, ISR changes, elections, rebalances, commits, connections, failed
authentications.

Cheap by construction: label children are bound once per topic / API version and kept
in dicts, and everything is counted per request or per batch, never per record.
`NullMetrics` has the same methods doing nothing: the broker without `metrics.port`.
"""

from __future__ import annotations

import struct

from prometheus_client import CollectorRegistry, Counter, Histogram

from broker.protocol.apis import ApiKey

# Request latencies span 100 µs (a metadata answer) to a long-poll's wait (up to minutes).
LATENCY_BUCKETS = (
    0.0001,
    0.00025,
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
)
FLUSH_BUCKETS = (0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0)

# The request phases (Kafka's RequestMetrics: TotalTimeMs, RequestQueueTimeMs,
# LocalTimeMs, RemoteTimeMs -- here the time parked in a purgatory -- and ResponseSendTimeMs).
PHASES = ("total", "queue", "handler", "purgatory", "send")

_API_HEADER = struct.Struct(">hh")  # a request frame starts with api_key, api_version


def api_name(key: int) -> str:
    """Kafka's name of an API in snake case (`produce`, `offset_commit`), or `unknown_<key>`."""
    try:
        return ApiKey(key).name.lower()
    except ValueError:
        return f"unknown_{key}"


class _Request:
    """The bound children of one (API, version): counted without any label lookup."""

    __slots__ = ("count", "phases")

    def __init__(self, metrics: BrokerMetrics, key: int, version: int) -> None:
        name = api_name(key)
        self.count = metrics.requests.labels(name, str(version))
        self.phases = [metrics.request_seconds.labels(name, phase) for phase in PHASES]


class _Topic:
    __slots__ = ("bytes_in", "messages_in", "bytes_out")

    def __init__(self, metrics: BrokerMetrics, topic: str) -> None:
        self.bytes_in = metrics.bytes_in.labels(topic)
        self.messages_in = metrics.messages_in.labels(topic)
        self.bytes_out = metrics.bytes_out.labels(topic)


class BrokerMetrics:
    """The broker's event metrics, in a registry of its own (tests run several brokers in
    one process, so never the global one)."""

    enabled = True

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        self.bytes_in = Counter(
            "kafka_topic_bytes_in",
            "Record batch bytes appended by producers.",
            ["topic"],
            registry=r,
        )
        self.messages_in = Counter(
            "kafka_topic_messages_in", "Records appended by producers.", ["topic"], registry=r
        )
        self.bytes_out = Counter(
            "kafka_topic_bytes_out",
            "Record bytes sent to consumers and followers in Fetch responses.",
            ["topic"],
            registry=r,
        )
        self.requests = Counter(
            "kafka_requests",
            "Requests received, by API and version.",
            ["api", "version"],
            registry=r,
        )
        self.request_seconds = Histogram(
            "kafka_request_duration_seconds",
            "Request latency by phase: total (frame in to response sent), queue (frame in to "
            "handler start), handler, purgatory (parked waiting for an event), send.",
            ["api", "phase"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.flush_seconds = Histogram(
            "kafka_log_flush_duration_seconds",
            "Time to fsync a log's unflushed segments.",
            buckets=FLUSH_BUCKETS,
            registry=r,
        )
        self.isr_shrinks = Counter(
            "kafka_isr_shrinks", "ISR shrinks proposed by this broker as leader.", registry=r
        )
        self.isr_expands = Counter(
            "kafka_isr_expands", "ISR expansions proposed by this broker as leader.", registry=r
        )
        self.leader_elections = Counter(
            "kafka_leader_elections",
            "Partitions this broker became leader of at a new leader epoch.",
            registry=r,
        )
        self.rebalances = Counter(
            "kafka_group_rebalances", "Group rebalances started by this coordinator.", registry=r
        )
        self.offset_commits = Counter(
            "kafka_group_offset_commits",
            "Partition offsets committed (stored) through this coordinator.",
            registry=r,
        )
        self.connections_opened = Counter(
            "kafka_connections_opened",
            "Connections accepted, by listener.",
            ["listener"],
            registry=r,
        )
        self.authentication_failures = Counter(
            "kafka_authentication_failures",
            "Failed authentications, by listener and SASL mechanism.",
            ["listener", "mechanism"],
            registry=r,
        )
        self._requests: dict[int, _Request] = {}
        self._topics: dict[str, _Topic] = {}
        self._led_epochs: dict[tuple[str, int], int] = {}

    def _topic(self, topic: str) -> _Topic:
        bound = self._topics.get(topic)
        if bound is None:
            bound = self._topics[topic] = _Topic(self, topic)
        return bound

    # -- the request path -----------------------------------------------------------------
    def request_done(
        self,
        frame: bytes,
        received: float,
        started: float,
        handled: float,
        answered: float,
        sent: float,
    ) -> None:
        """One request's phases, from `time.perf_counter()` readings by the network layer:
        frame in, handler start, handler end, answer ready (after any purgatory), sent."""
        if len(frame) < 4:
            return
        key, version = _API_HEADER.unpack_from(frame)
        slot = (key << 16) | (version & 0xFFFF)
        bound = self._requests.get(slot)
        if bound is None:
            bound = self._requests[slot] = _Request(self, key, version)
        bound.count.inc()
        total, queue, handler, purgatory, send = bound.phases
        total.observe(sent - received)
        queue.observe(started - received)
        handler.observe(handled - started)
        purgatory.observe(answered - handled)
        send.observe(sent - answered)

    def produced(self, topic: str, size: int, records: int) -> None:
        bound = self._topic(topic)
        bound.bytes_in.inc(size)
        bound.messages_in.inc(records)

    def fetched(self, topic: str, size: int) -> None:
        """Bytes of one topic in a Fetch response. Records out are not counted: fetches
        send file regions unread (zero-copy), and Kafka has no such meter either."""
        self._topic(topic).bytes_out.inc(size)

    # -- events elsewhere -----------------------------------------------------------------
    def log_flushed(self, seconds: float) -> None:
        self.flush_seconds.observe(seconds)

    def isr_proposed(self, old: tuple[int, ...], new: tuple[int, ...]) -> None:
        if len(new) < len(old):
            self.isr_shrinks.inc()
        elif len(new) > len(old):
            self.isr_expands.inc()

    def leadership_changed(
        self, topic: str, partition: int, leader_epoch: int, leads: bool
    ) -> None:
        """Counts an election won here: leader of `(topic, partition)` at an epoch not led
        before (a re-sent decision of the same epoch is not one)."""
        tp = (topic, partition)
        if not leads:
            self._led_epochs.pop(tp, None)
        elif self._led_epochs.get(tp) != leader_epoch:
            self._led_epochs[tp] = leader_epoch
            self.leader_elections.inc()

    def rebalance_started(self) -> None:
        self.rebalances.inc()

    def offsets_committed(self, count: int) -> None:
        self.offset_commits.inc(count)

    def connection_opened(self, listener: str) -> None:
        self.connections_opened.labels(listener).inc()

    def authentication_failed(self, listener: str, mechanism: str) -> None:
        """For the SASL listeners: call once per failed authentication."""
        self.authentication_failures.labels(listener, mechanism).inc()


class NullMetrics(BrokerMetrics):
    """Metrics off (no `metrics.port`): every event method does nothing, so the hot paths
    need no `if` of their own."""

    enabled = False

    def __init__(self) -> None:  # no registry, no series
        pass

    def request_done(self, frame, received, started, handled, answered, sent) -> None:
        pass

    def produced(self, topic, size, records) -> None:
        pass

    def fetched(self, topic, size) -> None:
        pass

    def log_flushed(self, seconds) -> None:
        pass

    def isr_proposed(self, old, new) -> None:
        pass

    def leadership_changed(self, topic, partition, leader_epoch, leads) -> None:
        pass

    def rebalance_started(self) -> None:
        pass

    def offsets_committed(self, count) -> None:
        pass

    def connection_opened(self, listener) -> None:
        pass

    def authentication_failed(self, listener, mechanism) -> None:
        pass
