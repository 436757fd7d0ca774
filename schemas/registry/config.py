"""The registry's configuration keys, declared once on the project's ConfigDef
(broker/config/definition.py) with Confluent Schema Registry's names, so a Confluent
``schema-registry.properties`` reads the same here. ``python -m schemas.registry
config-docs`` prints their reference (docs/configuration.md) and, with ``--properties``,
conf/registry.properties; an unknown key or a bad value stops the start with a message
naming both, so a typo never silently falls back to a default.

The store's connection security uses Confluent's names: `kafkastore.` followed by a key
of the clients' security table (broker/client/security.py: `kafkastore.security.protocol`,
`kafkastore.sasl.mechanism`, `kafkastore.sasl.jaas.config`, `kafkastore.ssl.*`).
"""

from __future__ import annotations

import socket
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from broker.client.security import PLAINTEXT, SECURITY_PROTOCOLS, SecurityConfig, split_security
from broker.config.definition import ConfigDef, ConfigError, at_least, load_properties, one_of
from broker.protocol.topic import topic_name_problem
from broker.util.clock import MINUTE_MS, SECOND_MS
from schemas.compatibility import Level

__all__ = [
    "REGISTRY_CONFIG",
    "AuthSettings",
    "ConfigError",
    "Listener",
    "RegistryConfig",
    "TlsSettings",
]


@dataclass(frozen=True)
class Listener:
    host: str
    port: int
    scheme: str = "http"


def _listener(value: str) -> Listener:
    first = value.split(",")[0].strip()
    parts = urlsplit(first)
    if parts.scheme not in ("http", "https"):
        raise ValueError("expected an http:// or https:// listener")
    try:
        port = parts.port
    except ValueError:
        port = None
    if not parts.hostname or port is None:
        raise ValueError("expected http://host:port")
    return Listener(parts.hostname, port, parts.scheme)


def _server(item: str) -> str:
    """host:port from ``host:port`` or Confluent's ``PROTOCOL://host:port`` (the protocol
    spoken is kafkastore.security.protocol's)."""
    if "://" in item:
        scheme, _, item = item.partition("://")
        if scheme.upper() not in SECURITY_PROTOCOLS:
            raise ValueError(f"expected one of {', '.join(SECURITY_PROTOCOLS)}, got {scheme}")
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
        "shutdown.graceful.ms",
        "int",
        1000,
        "How long a stop (SIGTERM) waits for open connections, in ms: requests under way "
        "finish, idle kept-alive connections close (an HTTPS one waits for its client's "
        "TLS close, which a client that is not reading never sends); then the rest are "
        "dropped.",
        validator=at_least(0),
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
    # HTTPS: Confluent's key names; PEM files rather than Java keystores.
    .define(
        "ssl.keystore.location",
        "string",
        None,
        "For an https:// listener: a PEM file with the registry's certificate chain and "
        "its private key.",
        optional=True,
        group="HTTPS",
    )
    .define(
        "ssl.key.password",
        "password",
        None,
        "The password of the private key in ssl.keystore.location, if it is encrypted.",
        optional=True,
        group="HTTPS",
    )
    .define(
        "ssl.truststore.location",
        "string",
        None,
        "A PEM file of the CA certificates client certificates are checked against "
        "(with ssl.client.authentication REQUESTED or REQUIRED).",
        optional=True,
        group="HTTPS",
    )
    .define(
        "ssl.client.authentication",
        "string",
        "NONE",
        "Whether an https client must show a certificate: NONE, REQUESTED or REQUIRED.",
        validator=one_of("NONE", "REQUESTED", "REQUIRED"),
        group="HTTPS",
    )
    # Basic authentication (docs/contracts/avro.md, "Security").
    .define(
        "authentication.method",
        "string",
        "NONE",
        "NONE: anyone reaching the listener may call every route. BASIC: HTTP basic "
        "authentication against authentication.users.file.",
        validator=one_of("NONE", "BASIC"),
        group="Authentication",
    )
    .define(
        "authentication.realm",
        "string",
        "SchemaRegistry",
        "The realm named in the WWW-Authenticate challenge.",
        group="Authentication",
    )
    .define(
        "authentication.users.file",
        "string",
        None,
        "With authentication.method=BASIC: the users file, one 'name: <hash>[,role...]' a "
        "line, hashes written by `python -m schemas.registry passwd`; read again when it "
        "changes. Not a Confluent key (Confluent names a JAAS file that names this one).",
        optional=True,
        group="Authentication",
    )
    .define(
        "authentication.roles",
        "list",
        [],
        "Roles let in; a user with none of them gets 403. Empty: every user in the file.",
        group="Authentication",
    )
    .define(
        "authentication.readonly.roles",
        "list",
        [],
        "Roles that may only read (GET): a user whose roles are all in this list gets 403 "
        "with error code 40301 on any write. Not a Confluent key.",
        group="Authentication",
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
        "The scheme other instances use to reach this one: http, or https for an https "
        "listener (checked against ssl.truststore.location, else the system's CAs); an "
        "https listener always uses https.",
        validator=one_of("http", "https"),
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


STORE_SECURITY_PREFIX = "kafkastore."


@dataclass(frozen=True)
class TlsSettings:
    keystore: str
    key_password: str | None
    truststore: str | None
    client_auth: str  # NONE | REQUESTED | REQUIRED


@dataclass(frozen=True)
class AuthSettings:
    users_file: str
    realm: str
    roles: tuple[str, ...]
    readonly_roles: tuple[str, ...]


def _tls(values: Mapping[str, Any], listener: Listener) -> TlsSettings | None:
    keystore = values["ssl.keystore.location"]
    if listener.scheme == "http":
        return None
    if not keystore:
        raise ConfigError(
            f"Configuration 'ssl.keystore.location' is required for the https listener "
            f"{values['listeners']!r}"
        )
    for key in ("ssl.keystore.location", "ssl.truststore.location"):
        if values[key] and not Path(values[key]).is_file():
            raise ConfigError(
                f"Invalid value {values[key]!r} for configuration {key}: no such file"
            )
    if values["ssl.client.authentication"] != "NONE" and not values["ssl.truststore.location"]:
        raise ConfigError(
            "Configuration 'ssl.truststore.location' is required when "
            f"ssl.client.authentication={values['ssl.client.authentication']}"
        )
    return TlsSettings(
        keystore,
        values["ssl.key.password"],
        values["ssl.truststore.location"],
        values["ssl.client.authentication"],
    )


def _auth(values: Mapping[str, Any]) -> AuthSettings | None:
    if values["authentication.method"] == "NONE":
        return None
    users_file = values["authentication.users.file"]
    if not users_file:
        raise ConfigError(
            "Configuration 'authentication.users.file' is required when authentication.method=BASIC"
        )
    return AuthSettings(
        users_file,
        values["authentication.realm"],
        tuple(values["authentication.roles"]),
        tuple(values["authentication.readonly.roles"]),
    )


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
    shutdown_graceful_ms: int = 1000

    tls: TlsSettings | None = None
    auth: AuthSettings | None = None
    store_security: SecurityConfig = PLAINTEXT

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
        store_security, raw = split_security(raw, STORE_SECURITY_PREFIX)
        values = REGISTRY_CONFIG.parse(raw)
        servers = values["kafkastore.bootstrap.servers"]
        if values["kafkastore.type"] == "kafka" and not servers:
            raise ConfigError(
                "Configuration 'kafkastore.bootstrap.servers' is required when "
                "kafkastore.type=kafka"
            )
        listener = _listener(values["listeners"])
        return cls(
            listener=listener,
            store_type=values["kafkastore.type"],
            bootstrap_servers=[_server(s) for s in servers or []],
            topic=values["kafkastore.topic"],
            replication_factor=values["kafkastore.topic.replication.factor"],
            timeout_ms=values["kafkastore.timeout.ms"],
            init_timeout_ms=values["kafkastore.init.timeout.ms"],
            compatibility_level=Level.parse(values["schema.compatibility.level"]),
            tls=_tls(values, listener),
            auth=_auth(values),
            store_security=store_security,
            leader_eligibility=values["leader.eligibility"],
            group_id=values["schema.registry.group.id"],
            host_name=values["host.name"] or "",
            # An https listener can only be reached over https.
            inter_instance_protocol=(
                "https" if listener.scheme == "https" else values["inter.instance.protocol"]
            ),
            session_timeout_ms=values["schema.registry.group.session.timeout.ms"],
            shutdown_graceful_ms=values["shutdown.graceful.ms"],
        )

    @classmethod
    def from_file(cls, path: str | Path, overrides: Iterable[str] = ()) -> RegistryConfig:
        """A properties file plus ``key=value`` overrides (``--override``)."""
        return cls.from_mapping(load_properties(path, overrides))
