"""Listeners as Kafka names them: `NAME://host:port`, each NAME given a security protocol by
`listener.security.protocol.map`, and the per-listener overrides
`listener.name.<name>.<key>` (lower-case listener name, as Kafka) of the TLS and SASL keys.

Checked whole at start (`check_listeners`): a bad combination stops the broker with the
key and value named, never a broker that binds half its listeners.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
TLS_PROTOCOLS = ("SSL", "SASL_SSL")
SASL_PROTOCOLS = ("SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
OVERRIDE_PREFIX = "listener.name."
# The keys a listener may override (Kafka's listener-prefixed configs).
LISTENER_KEYS = (
    "ssl.keystore.type",
    "ssl.keystore.location",
    "ssl.keystore.key",
    "ssl.keystore.certificate.chain",
    "ssl.key.password",
    "ssl.truststore.type",
    "ssl.truststore.location",
    "ssl.truststore.certificates",
    "ssl.endpoint.identification.algorithm",
    "ssl.client.auth",
    "ssl.enabled.protocols",
    "ssl.principal.mapping.rules",
    "sasl.enabled.mechanisms",
    "connections.max.reauth.ms",
)
JAAS_KEY = "sasl.jaas.config"


@dataclass(frozen=True)
class Listener:
    name: str
    host: str
    port: int


def parse_listener(text: str) -> Listener:
    """`NAME://host:port` (an empty host binds every interface)."""
    name, sep, rest = text.partition("://")
    if not sep or not name or not name.replace("_", "").isalnum():
        raise ValueError(f"listener {text!r} must look like NAME://host:port")
    parts = urlsplit(f"tcp://{rest}")
    try:
        port = parts.port
    except ValueError:
        port = None
    if port is None:
        raise ValueError(f"listener {text!r} has no valid port")
    return Listener(name.upper(), parts.hostname or "", port)


def listeners_problem(value: list[str]) -> str | None:
    names = []
    for item in value:
        try:
            names.append(parse_listener(item).name)
        except ValueError as exc:
            return str(exc)
    if len(set(names)) != len(names):
        return "each listener name may appear once"
    return None if value else "at least one listener is needed"


def parse_protocol_map(items: list[str]) -> dict[str, str]:
    """`NAME:PROTOCOL,...` -> {NAME: PROTOCOL}; ValueError names the bad entry."""
    found: dict[str, str] = {}
    for item in items:
        name, sep, protocol = item.partition(":")
        name, protocol = name.strip().upper(), protocol.strip().upper()
        if not sep or not name:
            raise ValueError(f"entry {item!r} must look like NAME:PROTOCOL")
        if protocol not in SECURITY_PROTOCOLS:
            raise ValueError(
                f"unknown security protocol {protocol!r} in {item!r} "
                f"(one of {', '.join(SECURITY_PROTOCOLS)})"
            )
        found[name] = protocol
    return found


def protocol_map_problem(items: list[str]) -> str | None:
    try:
        parse_protocol_map(items)
    except ValueError as exc:
        return str(exc)
    return None


def split_override(key: str) -> tuple[str, str] | None:
    """`listener.name.<l>.<key>` -> (LISTENER, key); None for any other key."""
    if not key.startswith(OVERRIDE_PREFIX):
        return None
    listener, _, rest = key[len(OVERRIDE_PREFIX) :].partition(".")
    return (listener.upper(), rest) if listener and rest else None


def is_jaas_key(key: str) -> bool:
    """`<mechanism>.sasl.jaas.config`, the mechanism in lower case (Kafka's form)."""
    mech, _, rest = key.partition(".")
    return rest == JAAS_KEY and mech.upper() in SASL_MECHANISMS


def check_listeners(cfg: Any) -> None:
    """The cross-key checks of a broker config's listeners; raises ValueError naming the
    key and value. `cfg` is a BrokerConfig (its values parsed one by one already)."""
    protocols = cfg.protocol_map
    names = [listener.name for listener in cfg.listeners]
    for listener in cfg.listeners:
        if listener.name not in protocols:
            raise ValueError(
                f"Invalid value {','.join(cfg['listeners'])!r} for configuration listeners: "
                f"listener {listener.name} has no security protocol in "
                "listener.security.protocol.map"
            )
    for listener in cfg.advertised_listeners or ():
        if listener.name not in names:
            raise ValueError(
                f"Invalid value {listener.name!r} in configuration advertised.listeners: "
                f"not one of the listeners ({', '.join(names)})"
            )
    inter = cfg["inter.broker.listener.name"]
    if inter is not None and inter.upper() not in names:
        raise ValueError(
            f"Invalid value {inter!r} for configuration inter.broker.listener.name: "
            f"not one of the listeners ({', '.join(names)})"
        )
    for key in cfg.values:
        split = split_override(key)
        if split is None:
            continue
        listener, rest = split
        if listener not in names:
            raise ValueError(f"Configuration {key!r} names listener {listener}, which is not one")
        if rest not in LISTENER_KEYS and not is_jaas_key(rest):
            raise ValueError(f"Unknown configuration {key!r} (value {cfg[key]!r})")
    for listener in cfg.listeners:
        protocol = protocols[listener.name]
        if protocol in TLS_PROTOCOLS:
            location = cfg.listener_value(listener.name, "ssl.keystore.location")
            key = _override_or_base(cfg, listener.name, "ssl.keystore.location")
            inline = [
                bool(cfg.listener_value(listener.name, k))
                for k in ("ssl.keystore.key", "ssl.keystore.certificate.chain")
            ]
            if any(inline):
                if not all(inline):
                    raise ValueError(
                        f"The {protocol} listener {listener.name} needs both ssl.keystore.key "
                        "and ssl.keystore.certificate.chain, or ssl.keystore.location"
                    )
            elif not location:
                raise ValueError(
                    f"Missing configuration {key} for the {protocol} listener {listener.name}"
                )
            elif not Path(location).is_file():
                raise ValueError(
                    f"Invalid value {location!r} for configuration {key}: no such file"
                )
            truststore = cfg.listener_value(listener.name, "ssl.truststore.location")
            if truststore and not Path(truststore).is_file():
                key = _override_or_base(cfg, listener.name, "ssl.truststore.location")
                raise ValueError(
                    f"Invalid value {truststore!r} for configuration {key}: no such file"
                )
        if protocol in SASL_PROTOCOLS:
            mechanisms = cfg.listener_value(listener.name, "sasl.enabled.mechanisms")
            key = _override_or_base(cfg, listener.name, "sasl.enabled.mechanisms")
            if not mechanisms:
                raise ValueError(f"Invalid value '' for configuration {key}: no mechanism")


def _override_or_base(cfg: Any, listener: str, key: str) -> str:
    override = f"{OVERRIDE_PREFIX}{listener.lower()}.{key}"
    return override if override in cfg.values else key
