"""The broker's lifecycle: load the logs, serve, run the background duties, stop cleanly."""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Callable

from broker.cluster import BrokerRegistration, Endpoint
from broker.config.server import BrokerConfig, ConfigError
from broker.coordinator import start_group_coordinator
from broker.log.cleaner import LogCleaner, PartitionState
from broker.log.manager import LogManager
from broker.metrics import broker_metrics
from broker.metrics.http import MetricsServer
from broker.metrics.state import BrokerStateCollector
from broker.security.acl_store import FileAclStore
from broker.security.authorizer import authorizer_from_config
from broker.security.credentials import Credentials
from broker.security.listener import listener_security
from broker.security.scram import ScramError
from broker.server.context import BrokerContext
from broker.server.duties import Duties
from broker.server.dynamic_config import DynamicConfigs
from broker.server.meta import ensure_meta, stored_cluster_id
from broker.server.metadata import MetadataCache
from broker.server.modes.local import LocalController, read_broker_overrides, read_topic_overrides
from broker.server.modes.membership import ClusterMembership
from broker.server.network import NetworkServer
from broker.server.producer_ids import ProducerIdAllocator
from broker.server.replica_manager import ReplicaManager
from broker.server.replication_quota import LEADER_RATE, ReplicationQuota
from broker.server.topic_config import TopicConfigs
from broker.transactions.manager import start_transaction_coordinator
from broker.util.clock import now_ms
from broker.util.heap import HeapFreezer
from broker.util.purgatory import Purgatory

log = logging.getLogger(__name__)

PRODUCER_ID_FILE = "producer-id-block.json"


def open_broker_state(
    cfg: BrokerConfig,
    now_ms: Callable[[], int],
    cluster_id: str | None = None,
    topic_overrides: dict[str, dict[str, str]] | None = None,
    broker_overrides: dict[str, dict[str, str]] | None = None,
) -> BrokerContext:
    """Open (and recover) the logs and build what the handlers work on: the same wiring for
    the broker process and for in-process tests of the request handling.

    A single broker keeps its topic overrides and dynamic broker configs in files and is
    its own controller (`ctx.admin`, a LocalController, started once the listener is
    bound); a cluster broker gets its cluster id and both kinds of configs from ZooKeeper
    and its admin later.
    """
    for d in cfg.log_dirs:
        d.mkdir(parents=True, exist_ok=True)
    logs = LogManager(
        cfg.log_dirs,
        cfg.log_config,
        now_ms=now_ms,
        retention_check_interval_ms=cfg["log.retention.check.interval.ms"],
        background_flush=True,
    )
    if topic_overrides is None:
        topic_overrides = read_topic_overrides(cfg.log_dirs[0])
    if broker_overrides is None:
        broker_overrides = read_broker_overrides(cfg.log_dirs[0])
    topic_configs = TopicConfigs(cfg.log_config, topic_overrides)
    configs = DynamicConfigs(cfg, topic_configs, logs)
    for entity, overrides in broker_overrides.items():  # before the logs open
        try:
            configs.apply_broker(entity, overrides)
        except ValueError as exc:  # a hand-edited bad value: the static config stays
            log.error("ignoring the dynamic broker configs of %s %s: %s", entity, overrides, exc)
    metadata = MetadataCache(cluster_id=ensure_meta(cfg.log_dirs[0], cfg.broker_id, cluster_id))
    replicas = ReplicaManager(
        cfg.broker_id,
        logs,
        topic_configs,
        now_ms,
        retain_batches=cfg["max.idempotence.batches.to.retain"],
    )
    replicas.load()
    ctx = BrokerContext(
        cfg,
        metadata,
        replicas,
        ProducerIdAllocator(cfg.log_dirs[0] / PRODUCER_ID_FILE),
        now_ms,
        metrics=broker_metrics(cfg),
    )
    logs.on_checkpoint_written = ctx.metrics.checkpoint_written
    ctx.configs = configs
    ctx.leader_quota = ReplicationQuota(lambda: configs.current[LEADER_RATE])
    ctx.groups = start_group_coordinator(ctx)
    ctx.transactions = start_transaction_coordinator(ctx)
    ctx.authorizer = authorizer_from_config(cfg)
    ctx.credentials = open_credentials(cfg["sasl.scram.credentials.file"])
    if not cfg.cluster_mode:
        if ctx.authorizer is not None:
            ctx.acl_store = FileAclStore(ctx.authorizer, cfg.log_dirs[0])
            ctx.acl_store.load()
        ctx.admin = LocalController(
            cfg.broker_id,
            metadata,
            replicas,
            topic_configs,
            cfg.log_dirs[0],
            cfg["num.partitions"],
            cfg["default.replication.factor"],
            ctx.credentials,
        )
    return ctx


def open_credentials(path: str | None) -> Credentials:
    try:
        return Credentials(path)
    except (OSError, ValueError, ScramError) as exc:
        raise ConfigError(
            f"Invalid value {path!r} for configuration sasl.scram.credentials.file: {exc}"
        ) from None


def cleaner_view(replicas: ReplicaManager):
    """What the log cleaner needs of each partition: it cleans below the last stable offset
    and keeps the last batch of every producer the partition still tracks."""

    def view(log) -> PartitionState | None:
        partition = replicas.partitions.get((log.topic, log.partition))
        if partition is None:
            return None
        return PartitionState(partition.last_stable_offset, partition.producers.last_offsets())

    return view


async def expire_delayed(purgatory: Purgatory, now_ms: Callable[[], int]) -> None:
    """Answer the purgatory's operations whose deadline passed, sleeping until the next
    deadline (woken early when a new operation has an earlier one)."""
    wake = asyncio.Event()
    purgatory.on_earlier_deadline = lambda deadline_ms: wake.set()
    while True:
        deadline = purgatory.next_deadline()
        timeout = None if deadline is None else max(0.0, (deadline - now_ms()) / 1000)
        try:
            await asyncio.wait_for(wake.wait(), timeout)
        except TimeoutError:
            pass
        wake.clear()
        purgatory.expire_due(now_ms())


class Broker:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.ctx: BrokerContext | None = None
        self.networks: list[NetworkServer] = []  # one per listener
        self.cluster: ClusterMembership | None = None
        self.metrics_server: MetricsServer | None = None
        # Log compaction (broker/log/cleaner.py): threads clean, the event loop swaps.
        self.cleaner: LogCleaner | None = None
        self._background: asyncio.Future | None = None
        self._stopped = asyncio.Event()

    @property
    def port(self) -> int:
        """The first listener's bound port."""
        return self.networks[0].port

    def _advertised_endpoints(self) -> tuple[Endpoint, ...]:
        """Every listener as clients and brokers reach it: its `advertised.listeners` entry,
        else its own host (127.0.0.1 for all interfaces) and the port actually bound."""
        cfg = self.config
        advertised = {a.name: a for a in cfg.advertised_listeners or ()}
        endpoints = []
        for network in self.networks:
            given = advertised.get(network.listener)
            host = given.host if given is not None else network.host or "127.0.0.1"
            port = given.port if given is not None and given.port else network.port
            protocol = cfg.security_protocol(network.listener)
            endpoints.append(Endpoint(network.listener, host, port, protocol))
        return tuple(endpoints)

    async def start(self) -> None:
        cfg = self.config
        if cfg.cluster_mode:
            # ZooKeeper first: the cluster id and the topic configs come from there.
            self.cluster = ClusterMembership(cfg)
            await self.cluster.connect()
            cluster_id = await self.cluster.cluster_id(stored_cluster_id(cfg.log_dirs[0]))
            overrides = await self.cluster.topic_overrides()
            dynamic = await self.cluster.broker_overrides()
            self.ctx = open_broker_state(cfg, now_ms, cluster_id, overrides, dynamic)
            self.cluster.attach(self.ctx)
            if self.ctx.acl_store is not None:  # the ACLs in force before serving
                await self.ctx.acl_store.start()
        else:
            self.ctx = open_broker_state(cfg, now_ms)
        metadata, replicas = self.ctx.metadata, self.ctx.replicas
        self.networks = []
        for listener in cfg.listeners:  # each its own socket, served independently
            security = listener_security(cfg, listener.name, self.ctx.credentials)
            network = NetworkServer(
                self.ctx, listener.host, listener.port, cfg["socket.request.max.bytes"], security
            )
            self.networks.append(network)
            # In a cluster: bound (the registration names the ports), listening only once
            # registered; served earlier, an empty metadata cache tells clients "no
            # brokers" (docs/contracts/cluster.md, "A broker in a cluster").
            await network.start(serving=self.cluster is None)
        endpoints = self._advertised_endpoints()
        if self.cluster is not None:
            await self.cluster.start(endpoints)
            for network in self.networks:
                await network.serve()
        else:
            self.ctx.admin.start(BrokerRegistration(cfg.broker_id, endpoints, cfg["broker.rack"]))
        if self.ctx.metrics.enabled:
            await self._serve_metrics(self.networks[0].host)
        background = [self._duties(), *(expire_delayed(p, now_ms) for p in self.ctx.purgatories())]
        if cfg.cleaner_config.enabled:  # log compaction
            self.cleaner = LogCleaner(
                replicas.logs, cfg.cleaner_config, now_ms, cleaner_view(replicas)
            )
            background.append(self.cleaner.run())
        self._background = asyncio.gather(*background)
        log.info(
            "broker %d serving on %s (cluster %s, %d partitions%s)",
            cfg.broker_id,
            ", ".join(f"{n.listener}://{n.host or '*'}:{n.port}" for n in self.networks),
            metadata.cluster_id,
            len(replicas.partitions),
            f", ZooKeeper {cfg['zookeeper.connect']}" if self.cluster else "",
        )

    async def _serve_metrics(self, listener_host: str) -> None:
        """The Prometheus endpoint (broker/metrics/), on the event loop like the rest."""
        cfg, ctx = self.config, self.ctx
        networks = self.networks
        ctx.metrics.registry.register(
            BrokerStateCollector(
                ctx,
                lambda: {network.listener: network.connections for network in networks},
                per_partition=cfg["metrics.partition.series.enabled"],
            )
        )
        host = cfg["metrics.host"] if cfg["metrics.host"] is not None else listener_host
        self.metrics_server = MetricsServer(ctx.metrics.registry, host, cfg["metrics.port"])
        port = await self.metrics_server.start()
        log.info("broker %d metrics at http://%s:%d/metrics", cfg.broker_id, host or "*", port)

    async def _duties(self) -> None:
        """The time-driven duties (broker/server/duties.py), about once a second."""
        duties = Duties(self.config, self.ctx, now_ms())
        while True:
            await asyncio.sleep(duties.tick_ms / 1000)
            try:
                duties.run(now_ms())
            except Exception:
                log.exception("background duty failed; retrying next tick")

    async def stop(self) -> None:
        """Hand leadership over (cluster), stop serving, then flush and checkpoint so the
        next start needs no recovery."""
        if self.cluster is not None and self.config["controlled.shutdown.enable"]:
            await self.cluster.controlled_shutdown()
        if self._background is not None:
            self._background.cancel()
            await asyncio.gather(self._background, return_exceptions=True)
        if self.cleaner is not None:  # log compaction: before the logs close
            self.cleaner.shutdown()
        if self.ctx is not None and self.ctx.transactions is not None:
            self.ctx.transactions.markers.close()
        for network in self.networks:
            await network.stop()
        if self.metrics_server is not None:
            await self.metrics_server.stop()
        if self.cluster is not None:
            await self.cluster.stop()
        if self.ctx is not None:
            self.ctx.replicas.logs.checkpoint(self.ctx.replicas.high_watermarks())
            self.ctx.replicas.logs.close()
        self._stopped.set()
        log.info("broker %d stopped cleanly", self.config.broker_id)

    async def run_until_signalled(self) -> None:
        heap = HeapFreezer(now_ms())  # this process is the broker's (broker/util/heap.py)
        try:
            await self.start()
        except BaseException:
            heap.close()
            # Leave nothing behind: a registration, a listener, open logs.
            if self.cluster is not None:
                await self.cluster.stop()
            for network in self.networks:
                await network.stop()
            if self.ctx is not None:
                self.ctx.replicas.logs.close()
            raise
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        heap.freeze_now()  # what start-up loaded lives as long as the broker
        thawing = asyncio.create_task(heap.run())
        await stop.wait()
        thawing.cancel()
        await self.stop()
