"""Configs that change while the broker runs (DescribeConfigs, AlterConfigs,
IncrementalAlterConfigs): each topic's overrides and the broker's dynamic keys, layered as
Kafka layers them, checked before anything is stored and applied to the logs at once.

A broker key's value comes from the first layer that sets it (Kafka's config sources):

    DYNAMIC_BROKER_CONFIG (2)          this broker's dynamic configs (`/config/brokers/<id>`)
    DYNAMIC_DEFAULT_BROKER_CONFIG (3)  every broker's (`/config/brokers/<default>`)
    STATIC_BROKER_CONFIG (4)           server.properties and --override
    DEFAULT_CONFIG (5)                 the key's declared default

and a key that is unset in all of them falls back to its synonyms (`log.retention.ms` to
`log.retention.minutes` to `log.retention.hours`), as declared on the key. A topic key is
the topic's override (DYNAMIC_TOPIC_CONFIG, 1), else its broker synonym's value. Which
broker keys may change at run time is declared once, on the key (`dynamic=True` in
broker/config/server.py); they are the ones every log reads afresh (its LogConfig).

Where the dynamic configs are stored is the mode's (a single broker's files,
broker/server/modes/local.py; ZooKeeper with change notifications in a cluster,
broker/server/modes/zk_topic_admin.py and config_changes.py); both end in `apply_topic` /
`apply_broker` here.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from broker.config.definition import ConfigDef, ConfigError, Key
from broker.config.server import SERVER_CONFIG, BrokerConfig
from broker.log.manager import LogManager
from broker.protocol.errors import ErrorCode, Refused
from broker.protocol.topic import topic_name_problem
from broker.server.topic_config import TOPIC_CONFIG, TopicConfigs, apply_overrides, effective_value

log = logging.getLogger(__name__)

# The entity name of the cluster-wide broker defaults (Kafka's, in ZooKeeper and files);
# a request names them with the empty resource name.
DEFAULT_BROKER = "<default>"


class ResourceType(enum.IntEnum):
    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8


class ConfigSource(enum.IntEnum):
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5


# DescribeConfigs v3+ config_type of our key types.
CONFIG_TYPES = {"boolean": 1, "string": 2, "int": 3, "long": 5, "double": 6, "list": 7}
PASSWORD_TYPE = 9


class ConfigRefused(Refused):
    """Why a config request for one resource was refused: a Kafka error code and a message
    naming the key and value."""


@dataclass(frozen=True)
class Synonym:
    name: str
    value: str | None
    source: ConfigSource


@dataclass(frozen=True)
class ConfigEntry:
    """One key as DescribeConfigs shows it."""

    key: Key
    value: str | None
    source: ConfigSource
    read_only: bool
    synonyms: list[Synonym] = field(default_factory=list)

    @property
    def sensitive(self) -> bool:
        return self.key.type == "password"


class DynamicConfigs:
    """The broker's config layers and the topics' overrides, and what they put in force."""

    def __init__(self, static: BrokerConfig, topic_configs: TopicConfigs, logs: LogManager):
        self.static = static
        self.topic_configs = topic_configs
        self.logs = logs
        self.broker_id = static.broker_id
        # entity (DEFAULT_BROKER or this broker's id) -> its dynamic keys
        self._dynamic: dict[str, dict[str, str]] = {DEFAULT_BROKER: {}, str(self.broker_id): {}}
        self.current = static  # the broker config in force: every layer applied

    # -- what is stored ---------------------------------------------------------------------
    def broker_overrides(self, entity: str) -> dict[str, str]:
        return dict(self._dynamic.get(entity, {}))

    def overrides(self, resource: ResourceType, name: str) -> dict[str, str]:
        if resource == ResourceType.TOPIC:
            return self.topic_configs.overrides(name)
        return self.broker_overrides(name)

    def inherited(self, resource: ResourceType, name: str) -> str | None:
        """The value key `name` has where the resource does not override it (what
        IncrementalAlterConfigs' APPEND and SUBTRACT start from)."""
        if resource == ResourceType.TOPIC:
            if name not in TOPIC_CONFIG.keys:
                return None
            return effective_value(name, self.topic_configs.default)
        key = SERVER_CONFIG.keys.get(name)
        return key.format(self.current.values[name]) if key is not None else None

    def _layers(self, dynamic: Mapping[str, Mapping[str, str]] | None = None):
        dynamic = self._dynamic if dynamic is None else dynamic
        return (
            (ConfigSource.DYNAMIC_BROKER_CONFIG, dynamic[str(self.broker_id)]),
            (ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG, dynamic[DEFAULT_BROKER]),
            (ConfigSource.STATIC_BROKER_CONFIG, self.static.given),
        )

    def _effective(self, dynamic: Mapping[str, Mapping[str, str]]) -> BrokerConfig:
        """The broker config with every layer applied (raises ConfigError)."""
        merged: dict = {}
        for _, layer in reversed(self._layers(dynamic)):
            merged.update(layer)
        return BrokerConfig.from_mapping(merged)

    # -- checks before anything is stored ------------------------------------------------------
    def resolve(self, resource_type: int, name: str, topics: Mapping) -> tuple[ResourceType, str]:
        """A request's resource as (type, entity): a topic that exists (`topics`), this
        broker's id, or DEFAULT_BROKER for the empty broker name; else ConfigRefused."""
        if resource_type == ResourceType.TOPIC:
            problem = topic_name_problem(name)
            if problem is not None:
                raise ConfigRefused(
                    ErrorCode.INVALID_TOPIC_EXCEPTION, f"Topic name {name!r} is illegal: {problem}"
                )
            if name not in topics:
                raise ConfigRefused(
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist."
                )
            return ResourceType.TOPIC, name
        if resource_type == ResourceType.BROKER:
            if name == "":
                return ResourceType.BROKER, DEFAULT_BROKER
            if not name.strip().lstrip("-").isdigit():
                raise ConfigRefused(
                    ErrorCode.INVALID_REQUEST, f"Broker id must be an integer, not {name!r}"
                )
            if int(name) != self.broker_id:
                # Clients send a broker's resource to that broker (the default to any).
                raise ConfigRefused(
                    ErrorCode.INVALID_REQUEST,
                    f"Unexpected broker id, expected {self.broker_id} or empty string, "
                    f"but received {name}",
                )
            return ResourceType.BROKER, str(self.broker_id)
        if resource_type == ResourceType.BROKER_LOGGER:
            raise ConfigRefused(
                ErrorCode.INVALID_REQUEST,
                "Broker loggers (resource type 8) cannot be described or changed here; "
                "set log levels in the broker's logging configuration",
            )
        raise ConfigRefused(ErrorCode.INVALID_REQUEST, f"Unsupported resource type {resource_type}")

    def check(self, resource: ResourceType, name: str, overrides: dict[str, str]) -> None:
        """Raise ConfigRefused unless `overrides` may become the whole set of the resource's
        dynamic configs (a topic's, or a broker entity's)."""
        definition = TOPIC_CONFIG if resource == ResourceType.TOPIC else SERVER_CONFIG
        unknown = sorted(k for k in overrides if k not in definition.keys)
        if unknown:
            kind = "topic" if resource == ResourceType.TOPIC else "broker"
            raise ConfigRefused(
                ErrorCode.INVALID_CONFIG, f"Unknown {kind} config name: {', '.join(unknown)}"
            )
        try:
            if resource == ResourceType.TOPIC:
                apply_overrides(self.topic_configs.default, overrides)
                return
            static = sorted(k for k in overrides if not SERVER_CONFIG.keys[k].dynamic)
            if static:
                raise ConfigRefused(
                    ErrorCode.INVALID_REQUEST,
                    f"Cannot update these configs dynamically: {', '.join(static)}",
                )
            self._effective({**self._dynamic, name: overrides}).log_config  # noqa: B018
        except (ConfigError, ValueError) as exc:  # a key's value, or LogConfig's own checks
            # Kafka answers a value its ConfigDef refuses with INVALID_REQUEST.
            raise ConfigRefused(ErrorCode.INVALID_REQUEST, str(exc)) from None

    # -- applying (validated values; a bad stored one raises ConfigError) -----------------------
    def apply(self, resource: ResourceType, entity: str, overrides: dict[str, str]) -> None:
        if resource == ResourceType.TOPIC:
            self.apply_topic(entity, overrides)
        else:
            self.apply_broker(entity, overrides)

    def apply_topic(self, topic: str, overrides: dict[str, str]) -> None:
        """`topic`'s overrides become `overrides`; its logs here are re-configured."""
        config = self.topic_configs.set(topic, overrides)
        if any(each.topic == topic for each in self.logs.logs()):
            self.logs.set_topic_config(topic, config)
        log.info("topic %s: config overrides now %s", topic, overrides)

    def apply_broker(self, entity: str, overrides: dict[str, str]) -> None:
        """The dynamic configs of `entity` (DEFAULT_BROKER or this broker's id) become
        `overrides`; every log without its own override of a changed key follows. Another
        broker's entity is not ours: ignored."""
        if entity not in self._dynamic:
            return
        dynamic = {**self._dynamic, entity: dict(overrides)}
        current = self._effective(dynamic)
        default = current.log_config
        self._dynamic, self.current = dynamic, current
        self.topic_configs.default = default
        self.logs.default_config = default
        for topic in sorted({each.topic for each in self.logs.logs()}):
            self.logs.set_topic_config(topic, self.topic_configs.log_config(topic))
        log.info("broker configs of %s now %s", entity, overrides)

    # -- describing ---------------------------------------------------------------------------
    def describe_topic(self, topic: str, names: Iterable[str] | None) -> list[ConfigEntry]:
        config = self.topic_configs.log_config(topic)
        overrides = self.topic_configs.overrides(topic)
        entries = []
        for key in _selected(TOPIC_CONFIG, names):
            synonyms = [
                Synonym(name, self._format(SERVER_CONFIG, name, value), source)
                for name, value, source in self._broker_synonyms(key.synonyms)
            ]
            if key.name in overrides:
                own = Synonym(key.name, overrides[key.name], ConfigSource.DYNAMIC_TOPIC_CONFIG)
                synonyms.insert(0, own)
            source = synonyms[0].source if synonyms else ConfigSource.DEFAULT_CONFIG
            value = effective_value(key.name, config)
            if value is None:
                # A key LogConfig does not hold: the first synonym is the one in force
                # (the topic's override, else its broker key's layer, else that key's
                # default), else the topic key's own default. Never null: what is
                # described can be written back (docs/contracts/topic-configs.md).
                value = synonyms[0].value if synonyms else key.format(key.default)
            entries.append(ConfigEntry(key, value, source, False, synonyms))
        return entries

    def describe_broker(self, entity: str, names: Iterable[str] | None) -> list[ConfigEntry]:
        """This broker's keys (every one, with its value in force), or, for DEFAULT_BROKER,
        the cluster-wide dynamic defaults that are set (as Kafka)."""
        keys = _selected(SERVER_CONFIG, names)
        if entity == DEFAULT_BROKER:
            keys = [k for k in keys if k.name in self._dynamic[DEFAULT_BROKER]]
        entries = []
        for key in keys:
            synonyms = [
                Synonym(name, self._format(SERVER_CONFIG, name, value), source)
                for name, value, source in self._broker_synonyms((key.name,))
            ]
            if entity == DEFAULT_BROKER:
                synonyms = [s for s in synonyms if s.source != ConfigSource.DYNAMIC_BROKER_CONFIG]
                value = self._dynamic[DEFAULT_BROKER][key.name]
            else:
                value = key.format(self.current.values[key.name])
            source = synonyms[0].source if synonyms else ConfigSource.DEFAULT_CONFIG
            entries.append(ConfigEntry(key, value, source, not key.dynamic, synonyms))
        return entries

    def _broker_synonyms(self, names: tuple[str, ...]):
        """(name, value, source) of each broker key `names` and their fallbacks that is set
        somewhere, by layer and then by key, the one in force first (Kafka's order)."""
        chain: list[str] = []
        for name in names:
            for each in (name, *SERVER_CONFIG.keys[name].synonyms):
                if each not in chain:
                    chain.append(each)
        found = []
        for source, layer in self._layers():
            found += [(name, layer[name], source) for name in chain if name in layer]
        for name in chain:
            default = SERVER_CONFIG.keys[name].default
            if default is not None:
                found.append((name, default, ConfigSource.DEFAULT_CONFIG))
        return found

    @staticmethod
    def _format(definition: ConfigDef, name: str, value) -> str | None:
        key = definition.keys[name]
        if key.type == "password":
            return None
        return value if isinstance(value, str) else key.format(value)


def _selected(definition: ConfigDef, names: Iterable[str] | None) -> list[Key]:
    """The keys asked for (None: all), in declaration order; unknown names are skipped."""
    if names is None:
        return list(definition.keys.values())
    wanted = set(names)
    return [key for key in definition.keys.values() if key.name in wanted]


# -- IncrementalAlterConfigs ----------------------------------------------------------------


class AlterOp(enum.IntEnum):
    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


def incremental(
    current: dict[str, str],
    operations: list[tuple[str, int, str | None]],
    definition: ConfigDef,
    value_in_force,
) -> dict[str, str]:
    """The resource's overrides after `operations` ((name, op, value), in request order).
    APPEND and SUBTRACT work on list keys, starting from the value in force
    (`value_in_force(name)`) when the key is not overridden yet."""
    names = [name for name, _, _ in operations]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ConfigRefused(
            ErrorCode.INVALID_REQUEST, f"Error due to duplicate config keys: {', '.join(repeated)}"
        )
    result = dict(current)
    for name, op, value in operations:
        key = definition.keys.get(name)
        if op not in AlterOp.__members__.values():
            raise ConfigRefused(ErrorCode.INVALID_REQUEST, f"Unknown config operation {op}")
        op = AlterOp(op)
        if op == AlterOp.DELETE:
            result.pop(name, None)
            continue
        if value is None:
            raise ConfigRefused(
                ErrorCode.INVALID_REQUEST, f"Null value not supported for {op.name} of {name}"
            )
        if op == AlterOp.SET:
            result[name] = value
            continue
        if key is None or key.type != "list":
            raise ConfigRefused(
                ErrorCode.INVALID_CONFIG,
                f"Config value {op.name.lower()} is not allowed for config key: {name}",
            )
        base = result[name] if name in result else value_in_force(name)
        items = [i.strip() for i in (base or "").split(",") if i.strip()]
        given = [i.strip() for i in value.split(",") if i.strip()]
        if op == AlterOp.APPEND:
            items += [i for i in given if i not in items]
        else:
            items = [i for i in items if i not in given]
        result[name] = ",".join(items)
    return result
