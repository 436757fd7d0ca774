"""Metrics read from the broker's state at scrape time: nothing to keep in step.

`BrokerStateCollector.collect()` runs on the event loop (the endpoint in `http.py` calls
`generate_latest` from a coroutine), so it reads the partitions, purgatories and groups
between two steps of the loop, never while they change.

Per-partition series (`metrics.partition.series.enabled`) are the ones whose count
grows with the partitions: log size and end offset, and consumer lag per partition.
Turned off, the same quantities come summed per topic (and per group and topic).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, SummaryMetricFamily
from prometheus_client.registry import Collector

from broker.controller.events import ControllerState
from broker.coordinator.group import GroupState
from broker.server.context import BrokerContext
from broker.transactions.state import TxnState

OPEN = frozenset(
    {
        TxnState.ONGOING,
        TxnState.PREPARE_COMMIT,
        TxnState.PREPARE_ABORT,
        TxnState.PREPARE_EPOCH_FENCE,
    }
)


class BrokerStateCollector(Collector):
    def __init__(
        self,
        ctx: BrokerContext,
        connections: Callable[[], dict[str, int]],
        per_partition: bool = True,
    ) -> None:
        self.ctx = ctx
        self.connections = connections  # listener -> open connections
        self.per_partition = per_partition

    def collect(self) -> Iterable:
        ctx = self.ctx
        yield from self._partitions(ctx)
        yield from self._cluster(ctx)
        purgatory = GaugeMetricFamily(
            "kafka_purgatory_size",
            "Requests waiting in a purgatory (long-poll fetches, acks=all produces, joins, "
            "heartbeats).",
            labels=["purgatory"],
        )
        for each in ctx.purgatories():
            purgatory.add_metric([each.name], len(each))
        yield purgatory
        yield from self._fetch_sessions(ctx)
        connections = GaugeMetricFamily(
            "kafka_network_connections",
            "Open client connections, by listener.",
            labels=["listener"],
        )
        for listener, count in self.connections().items():
            connections.add_metric([listener], count)
        yield connections
        if ctx.groups is not None:
            yield from self._groups(ctx)
        if ctx.transactions is not None:
            yield from transaction_families(ctx.transactions.state)

    def _fetch_sessions(self, ctx: BrokerContext) -> Iterable:
        """Kafka's FetchSessionCache metrics: NumIncrementalFetchSessions,
        NumIncrementalFetchPartitionsCached, IncrementalFetchSessionEvictions."""
        cache = ctx.fetch_sessions
        yield GaugeMetricFamily(
            "kafka_fetch_sessions", "Incremental fetch sessions cached.", len(cache.sessions)
        )
        yield GaugeMetricFamily(
            "kafka_fetch_session_partitions",
            "Partitions held by the cached fetch sessions.",
            cache.partitions_cached,
        )
        yield CounterMetricFamily(
            "kafka_fetch_session_evictions",
            "Fetch sessions evicted to make room for new ones.",
            cache.evictions,
        )

    def _partitions(self, ctx: BrokerContext) -> Iterable:
        hosted = list(ctx.replicas.partitions.values())
        leaders = [p for p in hosted if p.is_leader]
        yield GaugeMetricFamily(
            "kafka_partitions", "Partitions hosted by this broker (led or followed).", len(hosted)
        )
        yield GaugeMetricFamily(
            "kafka_leader_partitions", "Partitions this broker leads.", len(leaders)
        )
        fetchers = ctx.replicas.fetchers
        yield GaugeMetricFamily(
            "kafka_log_leader_epoch_files_pending",
            "Leader-epoch files changed in memory, not yet written: the log manager's ticks "
            "write them in slices of 50 ms, so a create or failover of thousands of "
            "partitions leaves some seconds of this background work.",
            ctx.replicas.logs.leader_epoch_files_pending,
        )
        yield GaugeMetricFamily(
            "kafka_replica_fetcher_failed_partitions",
            "Followed partitions whose fetched data could not be taken: not fetched until "
            "a new leadership (Kafka's FailedPartitionsCount).",
            len(fetchers.failed) if fetchers is not None else 0,
        )
        yield GaugeMetricFamily(
            "kafka_under_replicated_partitions",
            "Partitions led here whose ISR is smaller than their replica set.",
            sum(1 for p in leaders if p.under_replicated()),
        )
        yield GaugeMetricFamily(
            "kafka_under_min_isr_partitions",
            "Partitions led here whose ISR is smaller than min.insync.replicas (acks=all "
            "produces fail).",
            sum(1 for p in leaders if len(p.isr) < p.log.config.min_insync_replicas),
        )
        labels = ["topic", "partition"] if self.per_partition else ["topic"]
        size = GaugeMetricFamily(
            "kafka_log_size_bytes", "Bytes of a log's segments on disk.", labels=labels
        )
        end = GaugeMetricFamily(
            "kafka_log_end_offset",
            "The offset the next record appended will get"
            + ("" if self.per_partition else " (summed over the topic's partitions)")
            + ".",
            labels=labels,
        )
        if self.per_partition:
            for p in hosted:
                key = [p.topic, str(p.index)]
                size.add_metric(key, p.log.size_bytes)
                end.add_metric(key, p.log.log_end_offset)
        else:
            sizes: dict[str, int] = defaultdict(int)
            ends: dict[str, int] = defaultdict(int)
            for p in hosted:
                sizes[p.topic] += p.log.size_bytes
                ends[p.topic] += p.log.log_end_offset
            for topic in sizes:
                size.add_metric([topic], sizes[topic])
                end.add_metric([topic], ends[topic])
        yield size
        yield end
        yield from self._stable_lag(leaders)

    def _stable_lag(self, leaders: list) -> Iterable:
        """How far read_committed consumers are held back: high watermark minus last
        stable offset, per partition led here, or (series switched off) the largest of a
        topic's partitions: one hanging transaction shows as it is, not diluted in a sum.
        The broker-wide largest and the count of partitions with an open transaction are
        one series each, whatever the partition count (what an alert needs)."""
        labels = ["topic", "partition"] if self.per_partition else ["topic"]
        lag = GaugeMetricFamily(
            "kafka_log_stable_offset_lag",
            "High watermark minus last stable offset (records read_committed consumers "
            "wait for: open transactions)"
            + ("" if self.per_partition else "; the largest of the topic's partitions")
            + ", partitions led here.",
            labels=labels,
        )
        worst: dict[str, int] = defaultdict(int)
        largest = unstable = 0
        for p in leaders:
            behind = max(p.high_watermark - p.last_stable_offset, 0)
            largest = max(largest, behind)
            unstable += 1 if p.producers.ongoing else 0
            if self.per_partition:
                lag.add_metric([p.topic, str(p.index)], behind)
            else:
                worst[p.topic] = max(worst[p.topic], behind)
        for topic, behind in worst.items():
            lag.add_metric([topic], behind)
        yield lag
        yield GaugeMetricFamily(
            "kafka_log_stable_offset_lag_max",
            "The largest kafka_log_stable_offset_lag of the partitions led here.",
            largest,
        )
        yield GaugeMetricFamily(
            "kafka_partitions_with_open_transactions",
            "Partitions led here with at least one open transaction (the last stable offset "
            "is held at its first offset).",
            unstable,
        )

    def _cluster(self, ctx: BrokerContext) -> Iterable:
        metadata = ctx.metadata
        me = ctx.config.broker_id
        controller = metadata.controller_id
        # A single broker is its own controller (its local controller).
        active = controller == me or ctx.cluster is None
        yield GaugeMetricFamily(
            "kafka_controller_active",
            "1 on the broker that is the active controller, else 0 (the sum over the cluster "
            "is 1 when healthy).",
            1 if active else 0,
        )
        yield GaugeMetricFamily(
            "kafka_controller_id",
            "The active controller's broker id as this broker knows it.",
            me if ctx.cluster is None else controller,
        )
        # Reported by the controller alone, as Kafka does, so the cluster sum is right.
        offline = 0
        if active:
            offline = sum(
                1
                for partitions in metadata.topics.values()
                for state in partitions.values()
                if not metadata.is_online(state)
            )
        yield GaugeMetricFamily(
            "kafka_offline_partitions",
            "Partitions without a live leader (on the active controller; 0 elsewhere).",
            offline,
        )
        cluster_controller = ctx.cluster.controller if ctx.cluster is not None else None
        if cluster_controller is not None:
            yield from controller_families(cluster_controller)
        if ctx.cluster is not None:
            yield from isr_writer_families(ctx.cluster.isr_writer)

    def _groups(self, ctx: BrokerContext) -> Iterable:
        groups = list(ctx.groups.manager.groups.values())
        by_state = GaugeMetricFamily(
            "kafka_groups", "Consumer groups coordinated here, by state.", labels=["state"]
        )
        counts = {state: 0 for state in GroupState}
        for group in groups:
            counts[group.state] += 1
        for state, count in counts.items():
            by_state.add_metric([state.value], count)
        yield by_state
        labels = ["group", "topic", "partition"] if self.per_partition else ["group", "topic"]
        committed = GaugeMetricFamily(
            "kafka_group_committed_offset",
            "A group's committed offset (the position it resumes from).",
            labels=["group", "topic", "partition"],
        )
        lag = GaugeMetricFamily(
            "kafka_group_lag",
            "High watermark minus committed offset, for partitions led by this broker too "
            "(elsewhere: kafka_log_end_offset of the leader minus kafka_group_committed_offset)"
            + ("" if self.per_partition else "; summed over the topic's partitions")
            + ".",
            labels=labels,
        )
        totals: dict[tuple[str, str], int] = defaultdict(int)
        for group in groups:
            for (topic, index), offset in list(group.offsets.items()):
                if self.per_partition:
                    committed.add_metric([group.group_id, topic, str(index)], offset.offset)
                partition = ctx.replicas.partitions.get((topic, index))
                if partition is None or not partition.is_leader:
                    continue
                behind = max(partition.high_watermark - offset.offset, 0)
                if self.per_partition:
                    lag.add_metric([group.group_id, topic, str(index)], behind)
                else:
                    totals[(group.group_id, topic)] += behind
        for key, behind in totals.items():
            lag.add_metric(list(key), behind)
        if self.per_partition:
            yield committed
        yield lag


def transaction_families(coordinator) -> Iterable:
    """The transaction coordinator's ids (broker/transactions/): per state, and the open
    transactions (Ongoing, PrepareCommit, PrepareAbort, PrepareEpochFence)."""
    by_state = GaugeMetricFamily(
        "kafka_transactional_ids",
        "Transactional ids coordinated here, by state (Kafka's names).",
        labels=["state"],
    )
    counts = {state: 0 for state in TxnState}
    for owner in coordinator.partitions.values():
        for meta in owner.transactions.values():
            counts[meta.state] += 1
    for state, count in counts.items():
        by_state.add_metric([state.kafka_name], count)
    yield by_state
    yield GaugeMetricFamily(
        "kafka_transactions_open",
        "Open transactions coordinated here: begun and not yet completed.",
        sum(count for state, count in counts.items() if state in OPEN),
    )


def controller_families(controller) -> Iterable:
    """The controller's event loop as Kafka's ControllerStats shows it: the state it is in
    (the running event's, Idle between events), the events waiting, and per event type
    how many ran and for how long (broker/controller/events.py). Every broker of a cluster
    runs a controller's queue; only the active one processes more than its elections."""
    current = GaugeMetricFamily(
        "kafka_controller_state",
        "1 for the state the controller's event loop is in (the running event's), else 0.",
        labels=["state"],
    )
    for state in ControllerState:
        current.add_metric([state.value], 1 if controller.state is state else 0)
    yield current
    yield GaugeMetricFamily(
        "kafka_controller_event_queue_size",
        "Controller events waiting to be processed.",
        controller.queue_size,
    )
    events = SummaryMetricFamily(
        "kafka_controller_event_duration_seconds",
        "Controller events processed, by event type and the state it ran under, and the "
        "time they took.",
        labels=["event", "state"],
    )
    requests = CounterMetricFamily(
        "kafka_controller_zookeeper_requests",
        "ZooKeeper requests made by controller events, by event type (a multi of many "
        "partitions' writes is one request).",
        labels=["event"],
    )
    operations = CounterMetricFamily(
        "kafka_controller_zookeeper_operations",
        "ZooKeeper operations carried by those requests, by event type (a multi of N writes: N).",
        labels=["event"],
    )
    for name, tally in sorted(controller.stats.events.items()):
        events.add_metric([name, tally.state.value], tally.count, tally.seconds)
        requests.add_metric([name], tally.zk_requests)
        operations.add_metric([name], tally.zk_operations)
    yield events
    yield requests
    yield operations


def isr_writer_families(writer) -> Iterable:
    """The ZooKeeper work of a leader's ISR changes (broker/server/modes/isr_writer.py):
    batches written, and the requests and operations they took."""
    yield CounterMetricFamily(
        "kafka_isr_write_batches",
        "Batches of ISR changes written to ZooKeeper (the changes proposed in one turn "
        "of the event loop).",
        writer.batches,
    )
    yield CounterMetricFamily(
        "kafka_isr_write_zookeeper_requests",
        "ZooKeeper requests made writing ISR changes and their notifications.",
        writer.counts.requests,
    )
    yield CounterMetricFamily(
        "kafka_isr_write_zookeeper_operations",
        "ZooKeeper operations carried by those requests (one per partition written).",
        writer.counts.operations,
    )
