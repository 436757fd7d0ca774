"""The ZooKeeper consumer's keys, with Kafka 0.8's names and defaults (its old consumer's
properties), declared once; `python -m broker config-docs` prints their reference."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from broker.config.definition import ConfigDef, at_least, one_of


def _znode_name(value: str) -> str | None:
    """group.id and consumer.id become znode names under /consumers."""
    if not value:
        return "value must not be empty"
    if "/" in value or value in (".", ".."):
        return "value must not contain '/' nor be '.' or '..' (it names a znode)"
    return None


ZK_CONSUMER_CONFIG = (
    ConfigDef("ZooKeeper consumer (broker.client.zk_consumer)")
    .define(
        "zookeeper.connect",
        "string",
        None,
        "The cluster's ZooKeeper (`host:port[,host:port...][/chroot]`, the brokers' own "
        "zookeeper.connect): group state lives under its /consumers, brokers and partitions "
        "are read from its /brokers.",
    )
    .define(
        "group.id",
        "string",
        None,
        "The consumer group: members share the partitions of their topics.",
        validator=_znode_name,
    )
    .define(
        "consumer.id",
        "string",
        None,
        "This member's id within the group (the znode is `<group.id>_<consumer.id>`); unset: "
        "`<host>-<ms>-<8 hex>`, unique per start, as Kafka makes it.",
        optional=True,
        validator=_znode_name,
    )
    .define(
        "client.id",
        "string",
        None,
        "The client id sent to brokers; unset: group.id.",
        optional=True,
    )
    .define(
        "auto.commit.enable",
        "boolean",
        True,
        "Commit the offsets of records already processed (returned by an earlier poll) to "
        "ZooKeeper every auto.commit.interval.ms, in every rebalance and in close(). false: "
        "only commit() does (as Kafka 0.8), and a partition moving to another member is "
        "read again from the last commit().",
    )
    .define(
        "auto.commit.interval.ms",
        "int",
        60000,
        "How often auto commit writes the offsets; what a crash may redeliver is at most "
        "this much consumption.",
        validator=at_least(10),
    )
    .define(
        "auto.offset.reset",
        "string",
        "largest",
        "Where to start in a partition without a committed offset (or whose committed "
        "offset is no longer in the log): smallest (the log start) or largest (the end).",
        validator=one_of("smallest", "largest"),
    )
    .define(
        "rebalance.max.retries",
        "int",
        4,
        "Rebalance attempts before giving up (poll() then raises RebalanceFailedError); an "
        "attempt fails when a partition's owner znode still belongs to another member.",
        validator=at_least(1),
    )
    .define(
        "rebalance.backoff.ms",
        "int",
        2000,
        "Pause between rebalance attempts; also how long a rebalance waits for the records "
        "of the last poll() to be processed before committing.",
        validator=at_least(0),
    )
    .define(
        "zookeeper.session.timeout.ms",
        "int",
        6000,
        "ZooKeeper session timeout: a member whose process dies keeps its partitions this "
        "long (its ephemeral znodes go when the session expires). ZooKeeper bounds it to "
        "2-20 times its tickTime.",
        validator=at_least(100),
    )
    .define(
        "zookeeper.connection.timeout.ms",
        "int",
        6000,
        "How long the constructor waits to connect to ZooKeeper.",
        validator=at_least(100),
    )
    .define(
        "socket.timeout.ms",
        "int",
        30000,
        "How long requests to brokers are retried (leader changes, restarts) before an "
        "error reaches poll().",
        validator=at_least(100),
    )
    .define(
        "fetch.message.max.bytes",
        "int",
        1048576,
        "Bytes fetched per partition per request (at least one whole batch comes anyway).",
        validator=at_least(1),
    )
    .define(
        "fetch.min.bytes",
        "int",
        1,
        "The least data a fetch waits for (up to fetch.wait.max.ms) before the leader answers.",
        validator=at_least(0),
    )
    .define(
        "fetch.wait.max.ms",
        "int",
        100,
        "The longest a leader holds a fetch waiting for fetch.min.bytes; also how quickly a "
        "poll notices a rebalance.",
        validator=at_least(0),
    )
)


def parse_config(raw: Mapping[str, Any]) -> dict[str, Any]:
    """Validated values (defaults filled in) from strings or plain Python values; raises
    ConfigError naming the key and the value."""
    as_text = {
        key: (str(value).lower() if isinstance(value, bool) else str(value))
        for key, value in raw.items()
        if value is not None
    }
    return ZK_CONSUMER_CONFIG.parse(as_text)
