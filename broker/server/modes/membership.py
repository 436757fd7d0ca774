"""A broker's life in a ZooKeeper cluster (`zookeeper.connect` set).

Before the logs open: connect, check the cluster id, read the topic configs and the
dynamic broker configs. Once the listener is bound: follow config changes
(config_changes.py), register `/brokers/ids/<id>` (ephemeral: it goes with the session;
a second broker with the same id refuses to start), take part in the controller
election, replicate (fetchers) and keep the ISRs of the partitions it leads (shrinking
them on a timer; the changes are written to the partitions' state znodes with conditional
updates, batched, then an ISR change notification: isr_writer.py). A session that expires is re-established:
register again and run for controller again; meanwhile the broker keeps serving what it
leads. On a clean stop: a controlled shutdown first, so leadership moves before the
broker goes.

Everything runs on the broker's event loop; kazoo's threads only hand results over
(broker/zk/client.py).
"""

from __future__ import annotations

import asyncio
import logging

from broker.cluster import BrokerRegistration, Endpoint
from broker.config.server import BrokerConfig
from broker.controller.channels import BrokerChannels
from broker.controller.controller import AutoRebalance, Controller
from broker.controller.store import ZkControllerStore
from broker.inter_broker import NodeClient
from broker.inter_broker.security import inter_broker_security
from broker.protocol.apis import CONTROLLED_SHUTDOWN_API
from broker.protocol.errors import ErrorCode, KafkaError
from broker.security.acl_store import ZkAclStore
from broker.security.user_scram import scram_entries
from broker.server.meta import new_cluster_id
from broker.server.modes.config_changes import ConfigChangeListener
from broker.server.modes.isr_writer import ZkIsrWriter
from broker.server.modes.zk_topic_admin import ZkTopicAdmin
from broker.server.producer_ids import ZkProducerIdBlocks
from broker.server.replica_fetcher import FetcherSettings, ReplicaFetcherManager
from broker.server.replication_quota import FOLLOWER_RATE, ReplicationQuota
from broker.util.clock import now_ms
from broker.zk import layout as z
from broker.zk.client import NodeExistsError, SessionState, ZkClient

log = logging.getLogger(__name__)

# Between attempts to register again in a new ZooKeeper session.
REJOIN_BACKOFF_S = 1.0


class BrokerIdInUse(RuntimeError):
    """Another live broker is registered with this broker.id."""


class ClusterIdMismatch(RuntimeError):
    """The log dirs belong to another cluster than the one ZooKeeper holds."""


class ClusterMembership:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.broker_id = config.broker_id
        # How this broker reaches the others (TLS, SASL): checked before anything starts.
        self.inter_broker = inter_broker_security(config)
        self.zk = ZkClient(
            config["zookeeper.connect"],
            session_timeout_ms=config["zookeeper.session.timeout.ms"],
            connection_timeout_ms=config["zookeeper.connection.timeout.ms"],
        )
        self.broker_epoch = -1  # the czxid of our registration
        self.registration: BrokerRegistration | None = None
        self.controller: Controller | None = None
        self.config_changes: ConfigChangeListener | None = None
        self.ctx = None
        self._tasks: set[asyncio.Task] = set()
        self.isr_writer = ZkIsrWriter(self.zk, self.broker_id, self.spawn)
        self._session_lost = False
        self._stopping = False

    # -- before the logs open ---------------------------------------------------------------
    async def connect(self) -> None:
        await self.zk.start()
        await self.zk.ensure_paths(z.PERSISTENT_PATHS)
        self.zk.add_state_listener(self._on_session_state)

    async def cluster_id(self, local: str | None) -> str:
        """The cluster's id from `/cluster/id` (created from the log dirs' id, or a new one,
        by the first broker); log dirs of another cluster are refused."""
        found = await self.zk.get(z.CLUSTER_ID)
        if found is None:
            new = local or new_cluster_id()
            try:
                await self.zk.create(z.CLUSTER_ID, z.encode_cluster_id(new), makepath=True)
            except NodeExistsError:
                pass
            found = await self.zk.get(z.CLUSTER_ID)
        cluster_id = z.decode_cluster_id(found[0])
        if local is not None and local != cluster_id:
            raise ClusterIdMismatch(
                f"log.dirs hold data of cluster {local}, but ZooKeeper "
                f"({self.config['zookeeper.connect']}) belongs to cluster {cluster_id}"
            )
        return cluster_id

    async def topic_overrides(self) -> dict[str, dict[str, str]]:
        overrides = {}
        for topic in await self.zk.get_children(z.CONFIG_TOPICS) or []:
            found = await self.zk.get(z.topic_config_path(topic))
            if found is not None:
                overrides[topic] = z.decode_topic_config(topic, found[0])
        return overrides

    async def broker_overrides(self) -> dict[str, dict[str, str]]:
        """The dynamic broker configs (cluster-wide default and this broker's), so the logs
        open with them; the config change listener follows them from then on."""
        overrides = {}
        for entity in (z.DEFAULT_BROKER_ENTITY, str(self.broker_id)):
            found = await self.zk.get(z.broker_config_path(entity))
            if found is not None:
                overrides[entity] = z.decode_config(f"broker {entity}", found[0])
        return overrides

    async def load_topic_configs(self, topics) -> None:
        """Read the configs of topics this broker is about to host (a LeaderAndIsr for
        partitions it has never had), before their logs are created."""
        configs = self.ctx.replicas.topic_configs
        for topic in topics:
            found = await self.zk.get(z.topic_config_path(topic))
            overrides = z.decode_topic_config(topic, found[0]) if found else {}
            try:
                configs.set(topic, overrides)
            except Exception as exc:  # a hand-written bad value: keep the defaults
                log.error("topic %s: ignoring its config %s: %s", topic, overrides, exc)

    def _user_config(self, user: str, config: dict[str, str]) -> None:
        """A user's entity in ZooKeeper changed: its SCRAM credentials are what this
        broker's SASL listeners check from now on."""
        if self.ctx.credentials is not None:
            self.ctx.credentials.replace(user, scram_entries(config))

    # -- wiring -----------------------------------------------------------------------------
    def attach(self, ctx) -> None:
        """Give the broker's state its cluster parts: admin, producer ids, ISR writer,
        replica fetchers, the config change listener, the ACL store (started by the
        broker before it serves)."""
        self.ctx = ctx
        cfg = self.config
        ctx.cluster = self
        ctx.admin = ZkTopicAdmin(
            self.zk,
            ctx.metadata,
            ctx.replicas.topic_configs,
            cfg["num.partitions"],
            cfg["default.replication.factor"],
            self.spawn,
        )
        self.config_changes = ConfigChangeListener(
            self.zk, ctx.configs, self.spawn, now_ms, self._user_config
        )
        if ctx.authorizer is not None:
            ctx.acl_store = ZkAclStore(ctx.authorizer, self.zk, self.spawn, now_ms)
        ctx.producer_ids = ZkProducerIdBlocks(self.zk, self.broker_id, self.spawn)
        ctx.replicas.isr_writer = self.isr_writer
        ctx.replicas.on_dir_failed = lambda path: self.spawn(self._log_dir_failed())
        ctx.replicas.fetchers = ReplicaFetcherManager(
            ctx.replicas,
            FetcherSettings(
                broker_id=self.broker_id,
                max_wait_ms=cfg["replica.fetch.wait.max.ms"],
                min_bytes=cfg["replica.fetch.min.bytes"],
                max_bytes=cfg["replica.fetch.response.max.bytes"],
                partition_max_bytes=cfg["replica.fetch.max.bytes"],
                backoff_ms=cfg["replica.fetch.backoff.ms"],
                request_timeout_s=cfg["controller.socket.timeout.ms"] / 1000,
                num_fetchers=cfg["num.replica.fetchers"],
                security=self.inter_broker,
            ),
            ctx.now_ms,
            quota=ReplicationQuota(lambda: ctx.configs.current[FOLLOWER_RATE]),
        )

    async def _log_dir_failed(self) -> None:
        """Tell the controller a log dir failed (docs/contracts/cluster.md, "Log directory
        failure"): it asks which of our replicas are offline and moves their leaderships."""
        await self.zk.create(
            f"{z.LOG_DIR_EVENT_NOTIFICATION}/{z.LOG_DIR_EVENT_PREFIX}",
            z.encode_log_dir_event(self.broker_id),
            sequence=True,
            makepath=True,
        )

    def spawn(self, coro) -> asyncio.Task:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    # -- joining ------------------------------------------------------------------------------
    async def start(self, endpoints: tuple[Endpoint, ...]) -> None:
        self.registration = BrokerRegistration(
            self.broker_id, endpoints, self.config["broker.rack"], now_ms()
        )
        await self.config_changes.start()
        await self._register()
        listener = self.config.inter_broker_listener
        self.controller = Controller(
            self.broker_id,
            ZkControllerStore(self.zk),
            BrokerChannels(
                self.broker_id,
                listener,
                request_timeout_s=self.config["controller.socket.timeout.ms"] / 1000,
                security=self.inter_broker,
            ),
            listener=listener,
            # The broker default as it is now (a dynamic broker config may change it).
            unclean_default=lambda: self.ctx.replicas.topic_configs.default.unclean_leader_election,
            auto_rebalance=AutoRebalance(
                self.config["leader.imbalance.per.broker.percentage"],
                self.config["leader.imbalance.check.interval.seconds"],
            )
            if self.config["auto.leader.rebalance.enable"]
            else None,
        )
        self.controller.start()
        self.spawn(self._shrink_isrs())

    async def _register(self) -> None:
        """Create our ephemeral registration. One left by a previous run of this broker
        (killed, its session not expired yet) goes within the session timeout: wait for
        it; one that stays is a live broker with the same id: refuse to start."""
        path = z.broker_path(self.broker_id)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.config["zookeeper.session.timeout.ms"] / 1000 * 1.5 + 2
        while True:
            try:
                await self.zk.create(path, z.encode_broker(self.registration), ephemeral=True)
                break
            except NodeExistsError:
                gone = asyncio.Event()
                stat = await self.zk.exists(path, watch=lambda event, gone=gone: gone.set())
                if stat is None:
                    continue
                if stat.ephemeralOwner == self.zk.session_id:
                    break  # ours already (a retried create)
                remaining = deadline - loop.time()
                if remaining <= 0:
                    raise BrokerIdInUse(
                        f"broker.id {self.broker_id} is already registered in ZooKeeper "
                        f"({self.config['zookeeper.connect']}) by a live broker; each broker "
                        "needs its own broker.id"
                    ) from None
                log.info(
                    "broker.id %d is still registered by an earlier session; waiting up to "
                    "%.0f s for it to expire",
                    self.broker_id,
                    remaining,
                )
                try:
                    await asyncio.wait_for(gone.wait(), remaining)
                except TimeoutError:
                    pass
        stat = await self.zk.exists(path)
        self.broker_epoch = stat.czxid
        log.info("broker %d registered (epoch %d)", self.broker_id, self.broker_epoch)

    def _on_session_state(self, state: str) -> None:
        if state == SessionState.LOST:
            # Our registration and any /controller of ours are gone; we keep serving what
            # we lead until the controller (who saw us go) says otherwise.
            log.warning("broker %d: ZooKeeper session expired", self.broker_id)
            self._session_lost = True
        elif state == SessionState.SUSPENDED:
            log.warning("broker %d: ZooKeeper connection lost; waiting", self.broker_id)
        elif state == SessionState.CONNECTED and self._session_lost and not self._stopping:
            self._session_lost = False
            self.spawn(self._rejoin())

    async def _rejoin(self) -> None:
        log.info("broker %d: new ZooKeeper session: registering again", self.broker_id)
        while True:
            try:
                await self._register()
                break
            except Exception as exc:
                # Unregistered, a live broker is invisible to the controller (no
                # leadership, no LeaderAndIsr) until it restarts: keep trying.
                if self._stopping:
                    return
                log.warning(
                    "broker %d: could not register again (%s); retrying in %.1f s",
                    self.broker_id,
                    exc,
                    REJOIN_BACKOFF_S,
                )
                await asyncio.sleep(REJOIN_BACKOFF_S)
        if self.controller is not None:
            self.controller.session_renewed()

    # -- the ISR of partitions we lead ---------------------------------------------------------
    async def _shrink_isrs(self) -> None:
        lag = self.config["replica.lag.time.max.ms"]
        while True:
            await asyncio.sleep(max(lag / 2000, 0.05))
            try:
                self.ctx.replicas.shrink_isrs(lag)
            except Exception:
                log.exception("ISR shrink check failed")

    # -- leaving ------------------------------------------------------------------------------
    async def controlled_shutdown(self) -> None:
        """Ask the controller to move our leaderships away, retrying, before we stop."""
        cfg = self.config
        attempts = cfg["controlled.shutdown.max.retries"]
        for attempt in range(1, attempts + 1):
            try:
                remaining = await self._ask_controller_to_move()
                if remaining == 0:
                    log.info("controlled shutdown done: no leaderships left here")
                    return
                log.info("controlled shutdown: %d leaderships could not move yet", remaining)
            except Exception as exc:
                log.warning("controlled shutdown attempt %d failed: %s", attempt, exc)
            if attempt < attempts:
                await asyncio.sleep(cfg["controlled.shutdown.retry.backoff.ms"] / 1000)
        log.warning("controlled shutdown incomplete after %d attempts; stopping anyway", attempts)

    async def _ask_controller_to_move(self) -> int:
        found = await self.zk.get(z.CONTROLLER)
        if found is None:
            raise RuntimeError("no active controller")
        controller_id = z.decode_controller(found[0])
        registration = await self.zk.get(z.broker_path(controller_id))
        if registration is None:
            raise RuntimeError(f"controller {controller_id} is not registered")
        broker = z.decode_broker(controller_id, registration[0])
        endpoint = broker.endpoint(self.config.inter_broker_listener) or broker.endpoints[0]
        node = NodeClient(
            controller_id,
            endpoint,
            client_id=f"broker-{self.broker_id}",
            security=self.inter_broker,
        )
        try:
            response = await node.request(
                CONTROLLED_SHUTDOWN_API.key,
                CONTROLLED_SHUTDOWN_API.max_version,
                {"broker_id": self.broker_id, "broker_epoch": self.broker_epoch},
                self.config["controller.socket.timeout.ms"] / 1000,
            )
        finally:
            node.close()
        if response["error_code"] != ErrorCode.NONE:
            raise KafkaError("ControlledShutdown", response["error_code"])
        return len(response["remaining_partitions"])

    async def stop(self) -> None:
        self._stopping = True
        if self.controller is not None:
            await self.controller.stop()
        if self.ctx is not None and self.ctx.replicas.fetchers is not None:
            await self.ctx.replicas.fetchers.shutdown()
        await self.isr_writer.close()
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self.zk.close()
