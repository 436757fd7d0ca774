"""The config change listener against a real ZooKeeper, in process: configs written as
Kafka's tools write them (the entity's znode, then a sequential notification) reach the
broker's logs; at start the current configs are read without their notifications; a bad
stored value is ignored; notifications older than 15 minutes are purged."""

from __future__ import annotations

import asyncio
from contextlib import asynccontextmanager

from broker.config.server import BrokerConfig
from broker.log.manager import LogManager
from broker.server.dynamic_config import DynamicConfigs
from broker.server.modes.config_changes import NOTIFICATION_EXPIRY_MS, ConfigChangeListener
from broker.server.topic_config import TopicConfigs
from broker.util.clock import HOUR_MS, now_ms
from broker.zk import layout as z
from broker.zk.client import ZkClient
from tests.helpers.aio import run, until


def broker_state(tmp_path, broker_id=1) -> DynamicConfigs:
    cfg = BrokerConfig.from_mapping({"broker.id": str(broker_id), "log.dirs": str(tmp_path)})
    logs = LogManager(cfg.log_dirs, cfg.log_config)
    topic_configs = TopicConfigs(cfg.log_config)
    for topic in ("t", "u"):
        logs.create(topic, 0, topic_configs.log_config(topic))
    return DynamicConfigs(cfg, topic_configs, logs)


async def write(zk: ZkClient, entity_path: str, config: dict[str, str]) -> None:
    """As Kafka's AdminZkClient: the entity's config, then the notification."""
    path = z.config_path(entity_path)
    if await zk.exists(path) is None:
        await zk.create(path, z.encode_topic_config(config), makepath=True)
    else:
        await zk.set(path, z.encode_topic_config(config))
    await zk.create(
        f"{z.CONFIG_CHANGES}/{z.CONFIG_CHANGE_PREFIX}",
        z.encode_config_change(entity_path),
        sequence=True,
        makepath=True,
    )


def retention(configs: DynamicConfigs, topic: str) -> int:
    return configs.logs.get(topic, 0).config.retention_ms


@asynccontextmanager
async def zookeeper_and_spawn(zk_connect: str):
    """A started ZkClient with the cluster's paths, and a spawn whose tasks are cancelled
    at the end: what a listener runs on."""
    zk = ZkClient(zk_connect, session_timeout_ms=6000)
    await zk.start()
    await zk.ensure_paths(z.PERSISTENT_PATHS)
    tasks: set = set()

    def spawn(coro):
        task = asyncio.get_running_loop().create_task(coro)
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    try:
        yield zk, spawn, tasks
    finally:
        for task in list(tasks):
            task.cancel()
        await zk.close()


def test_changes_reach_the_logs_and_start_up_needs_no_old_notifications(tmp_path, zk_connect):
    async def scenario():
        async with zookeeper_and_spawn(zk_connect) as (zk, spawn, tasks):
            # before the broker starts: a topic override and a cluster-wide default
            await write(zk, "topics/t", {"retention.ms": "1000"})
            await write(zk, "brokers/<default>", {"log.retention.ms": "2000"})
            configs = broker_state(tmp_path / "logs")
            listener = ConfigChangeListener(zk, configs, spawn, now_ms)
            await listener.start()
            assert (retention(configs, "t"), retention(configs, "u")) == (1000, 2000)
            assert listener.last_sequence == 1  # read past, not needed

            # while it runs: this broker's own config wins over the default; another
            # broker's is not ours
            await write(zk, "brokers/1", {"log.retention.ms": "3000"})
            await write(zk, "brokers/2", {"log.retention.ms": "4000"})
            await until(lambda: retention(configs, "u") == 3000, "own broker config")
            await write(zk, "topics/t", {})  # override removed
            await until(lambda: retention(configs, "t") == 3000, "topic override removed")
            # a hand-written bad value changes nothing; later changes still arrive
            await write(zk, "topics/u", {"retention.ms": "soon"})
            await write(zk, "brokers/1", {})
            await until(lambda: retention(configs, "u") == 2000, "own config removed")
            assert configs.topic_configs.overrides("u") == {}
            assert listener.last_sequence == 6

            # notifications older than 15 minutes go with the next change
            listener.now_ms = lambda: now_ms() + NOTIFICATION_EXPIRY_MS + HOUR_MS
            await write(zk, "brokers/<default>", {})
            await until(lambda: retention(configs, "u") == 168 * HOUR_MS, "default removed")
            await until(lambda: not tasks, "purge finished")  # the pass that applied it also purges
            assert await zk.get_children(z.CONFIG_CHANGES) == []

    run(scenario())


def test_users_credentials_go_to_the_authenticator(tmp_path, zk_connect):
    """A user's entity (SCRAM credentials) is read at start and on every notification,
    its name as Kafka sanitizes it, and handed over whole."""
    seen: dict[str, dict[str, str]] = {}

    async def scenario():
        async with zookeeper_and_spawn(zk_connect) as (zk, spawn, _):
            await write(zk, "users/alice", {"SCRAM-SHA-256": "salt=YQ==,x"})
            configs = broker_state(tmp_path / "logs")
            listener = ConfigChangeListener(zk, configs, spawn, now_ms, seen.__setitem__)
            await listener.start()
            assert seen == {"alice": {"SCRAM-SHA-256": "salt=YQ==,x"}}  # read at start
            await write(zk, "users/CN%3Db", {"SCRAM-SHA-512": "s"})
            await write(zk, "users/alice", {})
            await until(lambda: seen.get("alice") == {} and "CN=b" in seen, "users followed")
            assert seen == {"alice": {}, "CN=b": {"SCRAM-SHA-512": "s"}}

    run(scenario())
