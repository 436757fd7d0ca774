"""The registry's configuration keys, declared once on the project's ConfigDef
(broker/config/definition.py) with Confluent Schema Registry's names, so a Confluent
``schema-registry.properties`` reads the same here. ``python -m schemas.registry
config-docs`` prints their reference (docs/configuration.md) and, with ``--properties``,
conf/registry.properties; an unknown key or a bad value stops the start with a message
naming both, so a typo never silently falls back to a default.
"""

from __future__ import annotations

import socket
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from broker.config.definition import ConfigDef, ConfigError, at_least, load_properties, one_of
from broker.protocol.topic import topic_name_problem
from broker.util.clock import MINUTE_MS, SECOND_MS
from schemas.compatibility import Level

__all__ = ["REGISTRY_CONFIG", "ConfigError", "Listener", "RegistryConfig"]


@dataclass(frozen=True)
class Listener:
    host: str
    port: int


def _listener(value: str) -> Listener:
    first = value.split(",")[0].strip()
    parts = urlsplit(first)
    if parts.scheme != "http":
        raise ValueError("only http:// listeners are supported")
    try:
        port = parts.port
    except ValueError:
        port = None
    if not parts.hostname or port is None:
        raise ValueError("expected http://host:port")
    return Listener(parts.hostname, port)


def _server(item: str) -> str:
    """host:port from ``host:port`` or Confluent's ``PLAINTEXT://host:port``."""
    if "://" in item:
        scheme, _, item = item.partition("://")
        if scheme.upper() != "PLAINTEXT":
            raise ValueError(f"only PLAINTEXT is supported, got {scheme}")
    host, _, port = item.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"expected host:port, got {item!r}")
    return item


def _problem(parse):
    """A ConfigDef validator from a parser that raises ValueError with the reason."""

    def check(value: Any) -> str | None:
        try:
            for item in value if isinstance(value, list) else [value]:
                parse(item)
        except ValueError as exc:
            return str(exc)
        return None

    return check


REGISTRY_CONFIG = (
    ConfigDef("Schema registry (conf/registry.properties)")
    .define(
        "listeners",
        "string",
        "http://0.0.0.0:8081",
        "Where the REST API listens: http://host:port (http only; of a comma-separated "
        "list, the first is used).",
        validator=_problem(_listener),
        group="Listener",
    )
    .define(
        "kafkastore.type",
        "string",
        "kafka",
        'Where the schemas live: "kafka" keeps them in a topic on our broker, replayed at '
        'start so ids and versions survive restarts; "memory" keeps them in this process '
        "only (tests, throwaway registries). Not a Confluent key.",
        validator=one_of("kafka", "memory"),
        group="Store",
    )
    .define(
        "kafkastore.bootstrap.servers",
        "list",
        None,
        "The broker to keep the store topic on: host:port[,host:port...] or "
        "PLAINTEXT://host:port. Required when kafkastore.type=kafka.",
        validator=_problem(_server),
        optional=True,
        group="Store",
    )
    .define(
        "kafkastore.topic",
        "string",
        "_schemas",
        "The store topic: one partition, created at start if missing.",
        validator=topic_name_problem,
        group="Store",
    )
    .define(
        "kafkastore.topic.replication.factor",
        "int",
        3,
        "Replication factor of the store topic when the registry creates it, as Confluent's; "
        "with fewer live brokers, as many as there are (a warning says so).",
        validator=at_least(1),
        group="Store",
    )
    .define(
        "kafkastore.timeout.ms",
        "int",
        5 * SECOND_MS,
        "How long an append may wait for the broker's acknowledgement (acks=all), in ms. "
        "(Confluent's default is 500; ours is 5000 to allow for a cold first produce.)",
        validator=at_least(1),
        group="Store",
    )
    .define(
        "kafkastore.init.timeout.ms",
        "int",
        MINUTE_MS,
        "How long the replay at start may take before the registry gives up, in ms.",
        validator=at_least(1),
        group="Store",
    )
    .define(
        "schema.compatibility.level",
        "string",
        "backward",
        "Default compatibility level for subjects without their own: none, backward, "
        "backward_transitive, forward, forward_transitive, full, full_transitive. A level "
        "set through PUT /config overrides this one and survives restarts.",
        validator=_problem(Level.parse),
        group="Compatibility",
    )
    .define(
        "leader.eligibility",
        "boolean",
        True,
        "Whether this instance may be elected leader (the one that writes to the store and "
        "hands out ids). One that may not forwards every write to the leader and serves "
        "reads from its own replay of the store.",
        group="Leader election",
    )
    .define(
        "schema.registry.group.id",
        "string",
        "schema-registry",
        "The group (on the store's broker) through which instances sharing a store elect "
        "their leader: every instance of one registry names the same group.",
        validator=lambda v: None if v else "must not be empty",
        group="Leader election",
    )
    .define(
        "host.name",
        "string",
        None,
        "The host other instances reach this one at (forwarded writes); unset: the "
        "listener's host, or this machine's name when the listener is 0.0.0.0. Every "
        "instance needs its own host:port.",
        optional=True,
        group="Leader election",
    )
    .define(
        "inter.instance.protocol",
        "string",
        "http",
        "The scheme other instances use to reach this one (only http).",
        validator=one_of("http"),
        group="Leader election",
    )
    .define(
        "schema.registry.group.session.timeout.ms",
        "int",
        10 * SECOND_MS,
        "How long the group coordinator waits without a heartbeat before it drops an "
        "instance and another one is elected, in ms (within the broker's "
        "group.min.session.timeout.ms and group.max.session.timeout.ms). Not a Confluent key.",
        validator=at_least(1),
        group="Leader election",
    )
)

# conf/registry.properties: the keys set there (the rest is shown at its default).
SAMPLE_HEADER = """Schema registry configuration: python -m schemas.registry start conf/registry.properties
Keys follow Confluent Schema Registry's names. Unknown keys and bad values are
refused at start with a message naming the key and the value.
Generated: python -m schemas.registry config-docs --properties > conf/registry.properties"""
SAMPLE_SETTINGS = {
    "listeners": "http://127.0.0.1:8081",
    "kafkastore.type": "kafka",
    "kafkastore.bootstrap.servers": "127.0.0.1:9092",
    "kafkastore.topic": "_schemas",
    "kafkastore.topic.replication.factor": "3",
    "kafkastore.timeout.ms": "5000",
    "kafkastore.init.timeout.ms": "60000",
    "schema.compatibility.level": "backward",
    "leader.eligibility": "true",
    "schema.registry.group.id": "schema-registry",
}


@dataclass(frozen=True)
class RegistryConfig:
    listener: Listener
    store_type: str
    bootstrap_servers: list[str]
    topic: str
    replication_factor: int
    timeout_ms: int
    init_timeout_ms: int
    compatibility_level: Level
    leader_eligibility: bool
    group_id: str
    host_name: str
    inter_instance_protocol: str
    session_timeout_ms: int

    @property
    def advertised_host(self) -> str:
        """The host other instances forward writes to."""
        if self.host_name:
            return self.host_name
        if self.listener.host in ("0.0.0.0", "::", ""):
            return socket.getfqdn()
        return self.listener.host

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any]) -> RegistryConfig:
        values = REGISTRY_CONFIG.parse(raw)
        servers = values["kafkastore.bootstrap.servers"]
        if values["kafkastore.type"] == "kafka" and not servers:
            raise ConfigError(
                "Configuration 'kafkastore.bootstrap.servers' is required when "
                "kafkastore.type=kafka"
            )
        return cls(
            listener=_listener(values["listeners"]),
            store_type=values["kafkastore.type"],
            bootstrap_servers=[_server(s) for s in servers or []],
            topic=values["kafkastore.topic"],
            replication_factor=values["kafkastore.topic.replication.factor"],
            timeout_ms=values["kafkastore.timeout.ms"],
            init_timeout_ms=values["kafkastore.init.timeout.ms"],
            compatibility_level=Level.parse(values["schema.compatibility.level"]),
            leader_eligibility=values["leader.eligibility"],
            group_id=values["schema.registry.group.id"],
            host_name=values["host.name"] or "",
            inter_instance_protocol=values["inter.instance.protocol"],
            session_timeout_ms=values["schema.registry.group.session.timeout.ms"],
        )

    @classmethod
    def from_file(cls, path: str | Path, overrides: Iterable[str] = ()) -> RegistryConfig:
        """A properties file plus ``key=value`` overrides (``--override``)."""
        return cls.from_mapping(load_properties(path, overrides))
