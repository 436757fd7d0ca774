"""Every metric the broker counts on its hot paths, declared once (names, help, labels).

What the broker already knows as state (partitions, ISR, purgatories, groups, the
controller) is read at scrape time by `state.BrokerStateCollector`; only events are
counted here: requests and their latency phases, bytes and messages in, bytes out, the
partitions fetches name, answer and read, log flushes, ISR changes, elections, rebalances, commits, connections, failed
authentications.

Cheap by construction: the request and produce/fetch paths add to plain tallies per
topic and per API version, found in a dict and collected at scrape time (below); every
count is per request or per batch, never per record.
`NullMetrics` has the same methods doing nothing: the broker without `metrics.port`.
"""

from __future__ import annotations

import struct
from bisect import bisect_left

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector

from broker.protocol.apis import API_BY_KEY, ApiKey

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


# The request and produce/fetch paths keep plain tallies (`_Request`, `_Topic`), changed on
# the event loop only -- the scrape runs there too, so no lock -- and `_HotPathCollector`
# turns them into counters and histograms at scrape time. prometheus_client's own
# Histogram takes a lock and walks its buckets on every observation: five of those per
# request cost a tenth of the broker's produce request path (bench/bench_metrics.py); a
# bisect and two additions per phase do not.


class _Request:
    """One (API, version): a request count, and per phase a latency histogram's bucket
    counts and sum."""

    __slots__ = ("api", "version", "count", "buckets", "sums")

    def __init__(self, key: int, version: int) -> None:
        self.api = api_name(key)
        self.version = str(version) if version >= 0 else "unsupported"
        self.count = 0
        # Per phase: one count per bucket bound, then the count above the last bound.
        self.buckets = [[0] * (len(LATENCY_BUCKETS) + 1) for _ in PHASES]
        self.sums = [0.0] * len(PHASES)


class _Topic:
    """One topic: bytes and records in, bytes out."""

    __slots__ = ("bytes_in", "messages_in", "bytes_out")

    def __init__(self) -> None:
        self.bytes_in = self.messages_in = self.bytes_out = 0


class _Network:
    """Requests handled while an earlier one of their connection still waited (read ahead,
    broker/server/pipeline.py), and socket writes of answers (each carries every answer
    ready at the time)."""

    __slots__ = ("read_ahead", "writes")

    def __init__(self) -> None:
        self.read_ahead = self.writes = 0


class _HotPathCollector(Collector):
    """kafka_topic_{bytes_in,messages_in,bytes_out}_total{topic},
    kafka_requests_total{api, version} and kafka_request_duration_seconds{api, phase}
    (versions summed), from the tallies."""

    def __init__(
        self, requests: dict[int, _Request], topics: dict[str, _Topic], network: _Network
    ) -> None:
        self.requests = requests
        self.topics = topics
        self.network = network

    def collect(self):
        families = (
            ("kafka_topic_bytes_in", "Record batch bytes appended by producers.", "bytes_in"),
            ("kafka_topic_messages_in", "Records appended by producers.", "messages_in"),
            (
                "kafka_topic_bytes_out",
                "Record bytes sent to consumers and followers in Fetch responses.",
                "bytes_out",
            ),
        )
        for name, documentation, attribute in families:
            family = CounterMetricFamily(name, documentation, labels=["topic"])
            for topic, tally in sorted(self.topics.items()):
                family.add_metric([topic], getattr(tally, attribute))
            yield family
        yield CounterMetricFamily(
            "kafka_network_requests_read_ahead",
            "Requests handled while an earlier request on their connection still waited "
            "for its answer (in a purgatory).",
            value=self.network.read_ahead,
        )
        yield CounterMetricFamily(
            "kafka_network_answer_writes",
            "Socket writes of answers; answers ready in the same loop turn share one.",
            value=self.network.writes,
        )
        count = CounterMetricFamily(
            "kafka_requests", "Requests received, by API and version.", labels=["api", "version"]
        )
        latency = HistogramMetricFamily(
            "kafka_request_duration_seconds",
            "Request latency by phase: total (frame in to response sent), queue (frame in to "
            "handler start), handler, purgatory (parked waiting for an event), send.",
            labels=["api", "phase"],
        )
        by_api: dict[str, list[_Request]] = {}
        # Unsupported versions of an API share one tally under several slots: once each.
        for tally in {id(t): t for t in list(self.requests.values())}.values():
            count.add_metric([tally.api, tally.version], tally.count)
            by_api.setdefault(tally.api, []).append(tally)
        for api, tallies in sorted(by_api.items()):
            for i, phase in enumerate(PHASES):
                cumulative, buckets = 0, []
                for b, bound in enumerate((*LATENCY_BUCKETS, float("inf"))):
                    cumulative += sum(t.buckets[i][b] for t in tallies)
                    buckets.append((_bound_text(bound), cumulative))
                latency.add_metric([api, phase], buckets, sum(t.sums[i] for t in tallies))
        yield count
        yield latency


class FetchTally:
    """Fetch responses of one kind of fetcher (follower or consumer), and the partitions
    their requests named, their answers carried and the broker read for them: with fetch
    sessions (KIP-227) these follow what changed, not what is followed."""

    __slots__ = ("responses", "requested", "answered", "reads")

    def __init__(self) -> None:
        self.responses = self.requested = self.answered = self.reads = 0


FETCHERS = ("follower", "consumer")


class _FetchCollector(Collector):
    """kafka_fetch_{responses,partitions_requested,partitions_answered,partition_reads}
    _total{fetcher}, from the tallies."""

    def __init__(self, tallies: dict[str, FetchTally]) -> None:
        self.tallies = tallies

    def collect(self):
        families = (
            ("kafka_fetch_responses", "Fetch responses sent.", "responses"),
            (
                "kafka_fetch_partitions_requested",
                "Partitions named by Fetch requests (incremental fetches name changed ones).",
                "requested",
            ),
            (
                "kafka_fetch_partitions_answered",
                "Partitions carried by Fetch responses (incremental ones: those with news).",
                "answered",
            ),
            (
                "kafka_fetch_partition_reads",
                "Partition reads (log lookups) done to answer Fetch requests.",
                "reads",
            ),
        )
        for name, documentation, attribute in families:
            family = CounterMetricFamily(name, documentation, labels=["fetcher"])
            for fetcher, tally in self.tallies.items():
                family.add_metric([fetcher], getattr(tally, attribute))
            yield family


def _bound_text(bound: float) -> str:
    return "+Inf" if bound == float("inf") else repr(bound)


class BrokerMetrics:
    """The broker's event metrics, in a registry of its own (tests run several brokers in
    one process, so never the global one)."""

    enabled = True

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        # Per topic and per request: tallies, collected by _HotPathCollector.
        self._requests: dict[int, _Request] = {}
        self._topics: dict[str, _Topic] = {}
        self._network = _Network()
        r.register(_HotPathCollector(self._requests, self._topics, self._network))
        self.fetches = {fetcher: FetchTally() for fetcher in FETCHERS}
        r.register(_FetchCollector(self.fetches))
        self.flush_seconds = Histogram(
            "kafka_log_flush_duration_seconds",
            "Time to fsync a log's unflushed segments.",
            buckets=FLUSH_BUCKETS,
            registry=r,
        )
        self.checkpoint_writes = Counter(
            "kafka_log_checkpoint_writes",
            "Checkpoint files of the log dirs rewritten (each fsynced); unchanged ones are "
            "not rewritten, so an idle broker adds none.",
            ["file"],
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
        self._led_epochs: dict[tuple[str, int], int] = {}

    def _topic(self, topic: str) -> _Topic:
        bound = self._topics.get(topic)
        if bound is None:
            bound = self._topics[topic] = _Topic()
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
        frame in, handler start, handler end, answer ready (after any purgatory), sent.
        `frame` is the request frame or its first 4 bytes (API key and version)."""
        if len(frame) < 4:
            return
        key, version = _API_HEADER.unpack_from(frame)
        slot = (key << 16) | (version & 0xFFFF)
        bound = self._requests.get(slot)
        if bound is None:
            bound = self._requests[slot] = self._tally(key, version)
        bound.count += 1
        # Unrolled: this runs once per request (a loop over the phases costs twice as much).
        b, sums, at = bound.buckets, bound.sums, bisect_left
        total, queue, handler = sent - received, started - received, handled - started
        purgatory, send = answered - handled, sent - answered
        b[0][at(LATENCY_BUCKETS, total)] += 1
        b[1][at(LATENCY_BUCKETS, queue)] += 1
        b[2][at(LATENCY_BUCKETS, handler)] += 1
        b[3][at(LATENCY_BUCKETS, purgatory)] += 1
        b[4][at(LATENCY_BUCKETS, send)] += 1
        sums[0] += total
        sums[1] += queue
        sums[2] += handler
        sums[3] += purgatory
        sums[4] += send

    def _tally(self, key: int, version: int) -> _Request:
        """The tally of a request first seen. A version outside the range we declare
        (answered anyway: an ApiVersions too new, say) shares one "unsupported" tally per
        API, so a client cannot make a series per int16."""
        api = API_BY_KEY.get(key)
        if api is not None and api.min_version <= version <= api.max_version:
            return _Request(key, version)
        shared = (key << 16) | 0xFFFF  # the slot of version -1, which no frame has
        if shared not in self._requests:
            self._requests[shared] = _Request(key, -1)
        return self._requests[shared]

    def request_read_ahead(self) -> None:
        """A request handled while an earlier one on its connection waits (network.py)."""
        self._network.read_ahead += 1

    def answers_written(self) -> None:
        """One socket write of the answers ready at the time (network.py)."""
        self._network.writes += 1

    def produced(self, topic: str, size: int, records: int) -> None:
        bound = self._topic(topic)
        bound.bytes_in += size
        bound.messages_in += records

    def fetched(self, topic: str, size: int) -> None:
        """Bytes of one topic in a Fetch response. Records out are not counted: fetches
        send file regions unread (zero-copy), and Kafka has no such meter either."""
        self._topic(topic).bytes_out += size

    def fetch_served(self, follower: bool, requested: int, answered: int, reads: int) -> None:
        """One Fetch answered: partitions its request named, its answer carried, and the
        partition reads it cost (broker/server/handlers/fetch.py)."""
        tally = self.fetches[FETCHERS[0] if follower else FETCHERS[1]]
        tally.responses += 1
        tally.requested += requested
        tally.answered += answered
        tally.reads += reads

    # -- events elsewhere -----------------------------------------------------------------
    def log_flushed(self, seconds: float) -> None:
        self.flush_seconds.observe(seconds)

    def checkpoint_written(self, file: str) -> None:
        self.checkpoint_writes.labels(file).inc()

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

    def request_read_ahead(self) -> None:
        pass

    def answers_written(self) -> None:
        pass

    def produced(self, topic, size, records) -> None:
        pass

    def fetched(self, topic, size) -> None:
        pass

    def fetch_served(self, follower, requested, answered, reads) -> None:
        pass

    def log_flushed(self, seconds) -> None:
        pass

    def checkpoint_written(self, file) -> None:
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
