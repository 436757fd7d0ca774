"""The registry's configuration: a Java-properties file with Confluent's key names.

Every key is declared once in ``KEYS`` with its default and its parser; an
unknown key or a bad value stops the start with a message naming both, so a typo
never silently falls back to a default.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from schemas.compatibility import Level


class ConfigError(ValueError):
    pass


@dataclass(frozen=True)
class Listener:
    host: str
    port: int


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


def parse_properties(text: str) -> dict[str, str]:
    """Java-properties text as a dict: ``key=value`` or ``key: value``, ``#``/``!``
    comments, trailing-backslash continuation lines."""
    result: dict[str, str] = {}
    logical = ""
    for line in text.splitlines():
        stripped = line.strip()
        if not logical and (not stripped or stripped[0] in "#!"):
            continue
        if stripped.endswith("\\") and not stripped.endswith("\\\\"):
            logical += stripped[:-1]
            continue
        logical += stripped
        # The key ends at the first '=', ':' or blank; one separator may follow.
        match = re.match(r"^(?P<key>[^=:\s]+)\s*[=:]?\s*(?P<value>.*)$", logical)
        if match is None:
            raise ConfigError(f"cannot parse line {logical!r}: no key")
        key, value = match["key"], match["value"]
        result[key] = value.strip()
        logical = ""
    return result


def _listener(value: str) -> Listener:
    first = value.split(",")[0].strip()
    parts = urlsplit(first)
    if parts.scheme != "http":
        raise ValueError("only http:// listeners are supported")
    if not parts.hostname or parts.port is None:
        raise ValueError("expected http://host:port")
    return Listener(parts.hostname, parts.port)


def _servers(value: str) -> list[str]:
    servers = []
    for item in value.split(","):
        item = item.strip()
        if "://" in item:  # Confluent style: PLAINTEXT://host:port
            scheme, _, item = item.partition("://")
            if scheme.upper() != "PLAINTEXT":
                raise ValueError(f"only PLAINTEXT is supported, got {scheme}")
        host, _, port = item.rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"expected host:port, got {item!r}")
        servers.append(item)
    return servers


def _topic(value: str) -> str:
    if not re.fullmatch(r"[A-Za-z0-9._-]{1,249}", value) or value in (".", ".."):
        raise ValueError("a topic name is 1-249 of [A-Za-z0-9._-]")
    return value


def _positive_int(value: str) -> int:
    number = int(value)
    if number <= 0:
        raise ValueError("must be a positive integer")
    return number


def _store_type(value: str) -> str:
    if value not in ("kafka", "memory"):
        raise ValueError("must be kafka or memory")
    return value


# key -> (default, parser); a default of None means required (when used).
KEYS: dict[str, tuple[str | None, Callable]] = {
    "listeners": ("http://0.0.0.0:8081", _listener),
    "kafkastore.type": ("kafka", _store_type),
    "kafkastore.bootstrap.servers": (None, _servers),
    "kafkastore.topic": ("_schemas", _topic),
    "kafkastore.topic.replication.factor": ("1", _positive_int),
    "kafkastore.timeout.ms": ("5000", _positive_int),
    "kafkastore.init.timeout.ms": ("60000", _positive_int),
    "schema.compatibility.level": ("backward", Level.parse),
}


def load_config(properties: dict[str, str]) -> RegistryConfig:
    unknown = sorted(set(properties) - set(KEYS))
    if unknown:
        raise ConfigError(f"unknown key {unknown[0]!r} (known keys: {', '.join(KEYS)})")
    values = {}
    for key, (default, parser) in KEYS.items():
        raw = properties.get(key, default)
        if raw is None:
            values[key] = None
            continue
        try:
            values[key] = parser(raw)
        except ValueError as exc:
            raise ConfigError(f"invalid value {raw!r} for key {key!r}: {exc}") from None
    if values["kafkastore.type"] == "kafka" and values["kafkastore.bootstrap.servers"] is None:
        raise ConfigError(
            "key 'kafkastore.bootstrap.servers' is required when kafkastore.type=kafka"
        )
    return RegistryConfig(
        listener=values["listeners"],
        store_type=values["kafkastore.type"],
        bootstrap_servers=values["kafkastore.bootstrap.servers"] or [],
        topic=values["kafkastore.topic"],
        replication_factor=values["kafkastore.topic.replication.factor"],
        timeout_ms=values["kafkastore.timeout.ms"],
        init_timeout_ms=values["kafkastore.init.timeout.ms"],
        compatibility_level=values["schema.compatibility.level"],
    )


def read_config(path: str | Path) -> RegistryConfig:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from None
    return load_config(parse_properties(text))
