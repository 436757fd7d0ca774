"""ZooKeeper paths and the JSON stored at them, as Kafka 2.x writes them, so Kafka's own
tools (and people with zkCli) can read a cluster of ours (docs/contracts/cluster.md).

Pure functions: paths, and bytes <-> values. Readers ignore fields they do not know (later
Kafka releases add some); writers write exactly the documented fields.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from broker.cluster import BrokerRegistration, Endpoint, LeaderAndIsr
from broker.security.acl import (
    RESOURCE_TYPE_NAMES,
    AclError,
    PatternType,
    ResourcePattern,
    pattern_type_of,
    resource_type_of,
)

CLUSTER_ID = "/cluster/id"
BROKER_IDS = "/brokers/ids"
BROKER_TOPICS = "/brokers/topics"
CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
DELETE_TOPICS = "/admin/delete_topics"
REASSIGN_PARTITIONS = "/admin/reassign_partitions"
PREFERRED_REPLICA_ELECTION = "/admin/preferred_replica_election"
ISR_CHANGE_NOTIFICATION = "/isr_change_notification"
ISR_CHANGE_PREFIX = "isr_change_"
# A broker whose log dir failed says so here (docs/contracts/cluster.md, "Log directory
# failure"): log_dir_event_<sequence> holding its id.
LOG_DIR_EVENT_NOTIFICATION = "/log_dir_event_notification"
LOG_DIR_EVENT_PREFIX = "log_dir_event_"
LOG_DIR_FAILURE_EVENT = 1
CONFIG_TOPICS = "/config/topics"
CONFIG_BROKERS = "/config/brokers"
# A user's SCRAM credentials (and Kafka's quotas): /config/users/<sanitized user>.
CONFIG_USERS = "/config/users"
CONFIG_CHANGES = "/config/changes"
CONFIG_CHANGE_PREFIX = "config_change_"
# The config entity of every broker's dynamic defaults: /config/brokers/<default>.
DEFAULT_BROKER_ENTITY = "<default>"
PRODUCER_ID_BLOCK = "/latest_producer_id_block"

# Paths every cluster has, created (empty) by the first broker that finds them missing.
PERSISTENT_PATHS = (
    BROKER_IDS,
    BROKER_TOPICS,
    DELETE_TOPICS,
    ISR_CHANGE_NOTIFICATION,
    LOG_DIR_EVENT_NOTIFICATION,
    CONFIG_TOPICS,
    CONFIG_BROKERS,
    CONFIG_CHANGES,
)


def broker_path(broker_id: int) -> str:
    return f"{BROKER_IDS}/{broker_id}"


def topic_path(topic: str) -> str:
    return f"{BROKER_TOPICS}/{topic}"


def partitions_path(topic: str) -> str:
    return f"{BROKER_TOPICS}/{topic}/partitions"


def partition_state_path(topic: str, partition: int) -> str:
    return f"{BROKER_TOPICS}/{topic}/partitions/{partition}/state"


def delete_topic_path(topic: str) -> str:
    return f"{DELETE_TOPICS}/{topic}"


def topic_config_path(topic: str) -> str:
    return f"{CONFIG_TOPICS}/{topic}"


def broker_config_path(entity: str) -> str:
    """`entity`: a broker id, or DEFAULT_BROKER_ENTITY."""
    return f"{CONFIG_BROKERS}/{entity}"


def config_path(entity_path: str) -> str:
    """The znode of a config entity named as change notifications name it
    (`topics/<t>`, `brokers/<id>`, `brokers/<default>`)."""
    return f"/config/{entity_path}"


def _dump(value: dict) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def _load(data: bytes, what: str) -> dict:
    try:
        value = json.loads(data.decode())
    except (UnicodeDecodeError, ValueError) as exc:
        raise ZkDataError(f"{what}: not JSON ({exc})") from None
    if not isinstance(value, dict):
        raise ZkDataError(f"{what}: expected a JSON object, got {type(value).__name__}")
    return value


class ZkDataError(ValueError):
    """A znode holds data we cannot read (hand-edited, or from an incompatible writer)."""


# -- brokers ------------------------------------------------------------------------------


def encode_broker(registration: BrokerRegistration) -> bytes:
    plaintext = next(
        (e for e in registration.endpoints if e.security_protocol == "PLAINTEXT"), None
    )
    value: dict = {
        "listener_security_protocol_map": {
            e.listener: e.security_protocol for e in registration.endpoints
        },
        "endpoints": [e.url() for e in registration.endpoints],
        "jmx_port": -1,
        # host/port name the first PLAINTEXT endpoint (null without one), as Kafka.
        "host": plaintext.host if plaintext else None,
        "port": plaintext.port if plaintext else -1,
        "timestamp": str(registration.timestamp_ms),
        "version": 4,
    }
    if registration.rack is not None:
        value["rack"] = registration.rack
    return _dump(value)


def decode_broker(broker_id: int, data: bytes, epoch: int = -1) -> BrokerRegistration:
    value = _load(data, f"broker {broker_id} registration")
    protocols = value.get("listener_security_protocol_map") or {}
    endpoints = []
    for url in value.get("endpoints") or []:
        listener, _, address = str(url).partition("://")
        host, _, port = address.rpartition(":")
        if not listener or not port.isdigit():
            raise ZkDataError(f"broker {broker_id}: bad endpoint {url!r}")
        host = host.strip("[]")
        endpoints.append(Endpoint(listener, host, int(port), protocols.get(listener, listener)))
    if not endpoints and value.get("host"):  # registrations older than version 2
        endpoints.append(Endpoint("PLAINTEXT", value["host"], int(value["port"])))
    if not endpoints:
        raise ZkDataError(f"broker {broker_id}: registration has no endpoint")
    return BrokerRegistration(
        broker_id,
        tuple(endpoints),
        value.get("rack"),
        int(value.get("timestamp") or 0),
        epoch,
    )


# -- topics and partitions ----------------------------------------------------------------


def encode_assignment(
    partitions: dict[int, list[int]],
    reassigning: dict[int, Reassignment] | None = None,
) -> bytes:
    """A topic's replicas; with partitions being reassigned, Kafka 2.4's version 2 with
    their `adding_replicas` and `removing_replicas` (the replicas written are then all of
    them, target and original: docs/contracts/cluster.md, "Reassignment")."""
    value: dict = {
        "version": 1,
        "partitions": {str(p): list(r) for p, r in sorted(partitions.items())},
    }
    if reassigning:
        value["version"] = 2
        value["adding_replicas"] = {
            str(p): list(r.adding) for p, r in sorted(reassigning.items()) if r.adding
        }
        value["removing_replicas"] = {
            str(p): list(r.removing) for p, r in sorted(reassigning.items()) if r.removing
        }
    return _dump(value)


def decode_assignment(topic: str, data: bytes) -> dict[int, list[int]]:
    return _assignment_of(topic, _load(data, f"topic {topic} assignment"))


def _assignment_of(topic: str, value: dict) -> dict[int, list[int]]:
    partitions = value.get("partitions")
    if not isinstance(partitions, dict):
        raise ZkDataError(f"topic {topic}: no partitions map")
    try:
        return {int(p): [int(b) for b in replicas] for p, replicas in partitions.items()}
    except (TypeError, ValueError) as exc:
        raise ZkDataError(f"topic {topic}: bad partitions map ({exc})") from None


@dataclass(frozen=True)
class Reassignment:
    """A partition on its way from its original replicas to its target ones: while it
    moves, its replicas are target + the original ones not in the target; `adding` are
    the target's new ones, `removing` the original ones leaving."""

    target: tuple[int, ...]
    adding: tuple[int, ...]
    removing: tuple[int, ...]

    @classmethod
    def between(cls, original: list[int], target: list[int]) -> Reassignment:
        return cls(
            tuple(target),
            tuple(r for r in target if r not in original),
            tuple(r for r in original if r not in target),
        )

    @property
    def replicas(self) -> list[int]:
        """Every replica while moving: the target first (its first one is preferred)."""
        return [*self.target, *self.removing]

    @property
    def original(self) -> list[int]:
        return [r for r in self.replicas if r not in self.adding]


def decode_reassignments(topic: str, data: bytes) -> dict[int, Reassignment]:
    """The partitions of a topic's assignment znode being reassigned (version 2)."""
    return decode_topic(topic, data)[1]


def decode_topic(topic: str, data: bytes) -> tuple[dict[int, list[int]], dict[int, Reassignment]]:
    """A topic's assignment znode: its replicas per partition and the partitions being
    reassigned, the JSON parsed once (a 10,000-partition topic's is 200 kB)."""
    value = _load(data, f"topic {topic} assignment")
    partitions = _assignment_of(topic, value)
    try:
        adding = {
            int(p): [int(b) for b in r] for p, r in (value.get("adding_replicas") or {}).items()
        }
        removing = {
            int(p): [int(b) for b in r] for p, r in (value.get("removing_replicas") or {}).items()
        }
    except (TypeError, ValueError, AttributeError) as exc:
        raise ZkDataError(f"topic {topic}: bad adding/removing replicas ({exc})") from None
    moving: dict[int, Reassignment] = {}
    for p in sorted(set(adding) | set(removing)):
        if p not in partitions:
            continue
        leaving = [r for r in partitions[p] if r in removing.get(p, [])]
        target = [r for r in partitions[p] if r not in leaving]
        moving[p] = Reassignment(tuple(target), tuple(adding.get(p, [])), tuple(leaving))
    return partitions, moving


def encode_reassign_request(partitions: dict[tuple[str, int], list[int]]) -> bytes:
    """`/admin/reassign_partitions`, as Kafka's reassignment tool writes it."""
    return _dump(
        {
            "version": 1,
            "partitions": [
                {"topic": t, "partition": p, "replicas": list(r)}
                for (t, p), r in sorted(partitions.items())
            ],
        }
    )


def decode_reassign_request(data: bytes) -> dict[tuple[str, int], list[int]]:
    value = _load(data, "reassign partitions request")
    try:
        return {
            (str(e["topic"]), int(e["partition"])): [int(b) for b in e["replicas"]]
            for e in value.get("partitions") or []
        }
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ZkDataError(f"reassign partitions request: bad entry ({exc})") from None


def encode_partition_state(state: LeaderAndIsr) -> bytes:
    return _dump(
        {
            "controller_epoch": state.controller_epoch,
            "leader": state.leader,
            "version": 1,
            "leader_epoch": state.leader_epoch,
            "isr": list(state.isr),
        }
    )


def decode_partition_state(data: bytes, zk_version: int = -1) -> LeaderAndIsr:
    value = _load(data, "partition state")
    try:
        return LeaderAndIsr(
            int(value["leader"]),
            int(value["leader_epoch"]),
            tuple(int(b) for b in value["isr"]),
            int(value["controller_epoch"]),
            zk_version,
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise ZkDataError(f"partition state: missing or bad field ({exc})") from None


def encode_topic_config(config: dict[str, str]) -> bytes:
    return _dump({"version": 1, "config": dict(sorted(config.items()))})


def decode_topic_config(topic: str, data: bytes) -> dict[str, str]:
    return decode_config(f"topic {topic}", data)


def decode_config(entity: str, data: bytes) -> dict[str, str]:
    """The `config` map of any config entity's znode (topics and brokers share the layout)."""
    value = _load(data, f"{entity} config")
    config = value.get("config") or {}
    if not isinstance(config, dict):
        raise ZkDataError(f"{entity}: config is not a map")
    return {str(k): str(v) for k, v in config.items()}


# -- controller -------------------------------------------------------------------------


def encode_controller(broker_id: int, timestamp_ms: int) -> bytes:
    return _dump({"version": 1, "brokerid": broker_id, "timestamp": str(timestamp_ms)})


def decode_controller(data: bytes) -> int:
    try:
        return int(_load(data, "controller")["brokerid"])
    except (KeyError, TypeError, ValueError) as exc:
        raise ZkDataError(f"controller: bad brokerid ({exc})") from None


def encode_controller_epoch(epoch: int) -> bytes:
    return str(epoch).encode()


def decode_controller_epoch(data: bytes) -> int:
    return _decode_decimal(data, "controller_epoch")


def _decode_decimal(data: bytes, what: str) -> int:
    try:
        return int(data.decode().strip())
    except (UnicodeDecodeError, ValueError):
        raise ZkDataError(f"{what}: not a number: {data[:40]!r}") from None


# -- notifications --------------------------------------------------------------------------


def encode_partition_list(partitions: list[tuple[str, int]]) -> bytes:
    """`{"version":1,"partitions":[{"topic","partition"}...]}`: an ISR change notification
    and a preferred replica election request have this layout."""
    return _dump(
        {"version": 1, "partitions": [{"topic": t, "partition": p} for t, p in sorted(partitions)]}
    )


def decode_partition_list(data: bytes, what: str) -> list[tuple[str, int]]:
    value = _load(data, what)
    try:
        return [(str(p["topic"]), int(p["partition"])) for p in value.get("partitions") or []]
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ZkDataError(f"{what}: bad entry ({exc})") from None


def encode_isr_change(partitions: list[tuple[str, int]]) -> bytes:
    return encode_partition_list(partitions)


def decode_isr_change(data: bytes) -> list[tuple[str, int]]:
    return decode_partition_list(data, "isr change notification")


def encode_log_dir_event(broker_id: int) -> bytes:
    """`{"version":1,"broker":<id>,"event":1}`: Kafka's log dir failure notification."""
    return _dump({"version": 1, "broker": broker_id, "event": LOG_DIR_FAILURE_EVENT})


def decode_log_dir_event(data: bytes) -> int:
    """The broker id of a log dir failure notification."""
    value = _load(data, "log dir event notification")
    try:
        return int(value["broker"])
    except (KeyError, TypeError, ValueError) as exc:
        raise ZkDataError(f"log dir event notification: bad broker ({exc})") from None


def encode_config_change(entity_path: str) -> bytes:
    return _dump({"version": 2, "entity_path": entity_path})


def decode_config_change(data: bytes) -> str:
    """The entity path of a change notification (`topics/<t>`, `brokers/<id>`, ...); a
    version 1 notification (Kafka before 0.10.1, topics only) names the topic alone."""
    value = _load(data, "config change notification")
    if value.get("version") == 1 and value.get("entity_type") == "topics":
        return f"topics/{value.get('entity_name')}"
    path = value.get("entity_path")
    if not isinstance(path, str) or "/" not in path:
        raise ZkDataError(f"config change notification: bad entity_path {path!r}")
    return path


def encode_cluster_id(cluster_id: str) -> bytes:
    return _dump({"version": "1", "id": cluster_id})


def decode_cluster_id(data: bytes) -> str:
    try:
        return str(_load(data, "cluster id")["id"])
    except KeyError:
        raise ZkDataError("cluster id: no id field") from None


def encode_producer_id_block(broker_id: int, first: int, last: int) -> bytes:
    return _dump(
        {"version": 1, "broker": broker_id, "block_start": str(first), "block_end": str(last)}
    )


def decode_producer_id_block(data: bytes) -> tuple[int, int]:
    """(first, last) of the newest block handed out; last inclusive."""
    value = _load(data, "producer id block")
    try:
        return int(value["block_start"]), int(value["block_end"])
    except (KeyError, TypeError, ValueError) as exc:
        raise ZkDataError(f"producer id block: bad field ({exc})") from None


# -- the ZooKeeper-based consumer (Kafka 0.8's layout, docs/contracts/consumer-groups.md) ---

CONSUMERS = "/consumers"


def consumer_ids_path(group: str) -> str:
    return f"{CONSUMERS}/{group}/ids"


def consumer_id_path(group: str, consumer_id: str) -> str:
    return f"{CONSUMERS}/{group}/ids/{consumer_id}"


def consumer_owners_path(group: str, topic: str | None = None) -> str:
    base = f"{CONSUMERS}/{group}/owners"
    return base if topic is None else f"{base}/{topic}"


def consumer_owner_path(group: str, topic: str, partition: int) -> str:
    return f"{CONSUMERS}/{group}/owners/{topic}/{partition}"


def consumer_offsets_path(group: str, topic: str | None = None) -> str:
    base = f"{CONSUMERS}/{group}/offsets"
    return base if topic is None else f"{base}/{topic}"


def consumer_offset_path(group: str, topic: str, partition: int) -> str:
    return f"{CONSUMERS}/{group}/offsets/{topic}/{partition}"


@dataclass(frozen=True)
class ConsumerRegistration:
    """A member's `/consumers/<group>/ids/<id>`: topic -> number of streams (threads)."""

    subscription: dict[str, int]
    timestamp_ms: int = 0
    pattern: str = "static"


def encode_consumer_registration(registration: ConsumerRegistration) -> bytes:
    return _dump(
        {
            "version": 1,
            "subscription": dict(sorted(registration.subscription.items())),
            "pattern": registration.pattern,
            "timestamp": str(registration.timestamp_ms),
        }
    )


def decode_consumer_registration(consumer_id: str, data: bytes) -> ConsumerRegistration:
    value = _load(data, f"consumer {consumer_id} registration")
    subscription = value.get("subscription")
    if not isinstance(subscription, dict):
        raise ZkDataError(f"consumer {consumer_id}: no subscription map")
    try:
        return ConsumerRegistration(
            {str(t): int(n) for t, n in subscription.items()},
            int(value.get("timestamp") or 0),
            str(value.get("pattern") or "static"),
        )
    except (TypeError, ValueError) as exc:
        raise ZkDataError(f"consumer {consumer_id}: bad subscription ({exc})") from None


def encode_consumer_offset(offset: int) -> bytes:
    """The next offset the group reads, as decimal text (Kafka 0.8 wrote it so)."""
    return str(offset).encode()


def decode_consumer_offset(data: bytes, what: str = "consumer offset") -> int:
    return _decode_decimal(data, what)


# -- ACLs (Kafka 2.x's AclAuthorizer; the JSON of a resource's ACLs: broker/security/acl.py) --
# Literal patterns: /kafka-acl/<ResourceType>/<name>, changes announced under
# /kafka-acl-changes as `<ResourceType>:<name>`; prefixed patterns:
# /kafka-acl-extended/prefixed/<ResourceType>/<name>, announced under
# /kafka-acl-extended-changes as {"version":1,"resourceType","name","patternType"}.
ACL_LITERAL = "/kafka-acl"
ACL_EXTENDED = "/kafka-acl-extended"
ACL_LITERAL_CHANGES = "/kafka-acl-changes"
ACL_EXTENDED_CHANGES = "/kafka-acl-extended-changes"
ACL_CHANGE_PREFIX = "acl_changes_"


def acl_root(pattern_type) -> str:
    """Where the ACLs of a pattern type live (LITERAL, or an extended one: `prefixed`)."""
    if pattern_type == PatternType.LITERAL:
        return ACL_LITERAL
    return f"{ACL_EXTENDED}/{PatternType(pattern_type).name.lower()}"


def acl_path(pattern) -> str:
    return f"{acl_root(pattern.pattern_type)}/{RESOURCE_TYPE_NAMES[pattern.resource_type]}/{pattern.name}"


def acl_changes_path(pattern_type) -> str:
    return ACL_LITERAL_CHANGES if pattern_type == PatternType.LITERAL else ACL_EXTENDED_CHANGES


def encode_acl_change(pattern) -> bytes:
    kind = RESOURCE_TYPE_NAMES[pattern.resource_type]
    if pattern.pattern_type == PatternType.LITERAL:
        return f"{kind}:{pattern.name}".encode()
    return _dump(
        {"version": 1, "resourceType": kind, "name": pattern.name,
         "patternType": pattern.pattern_type.name}
    )  # fmt: skip


def decode_acl_change(changes_path: str, data: bytes):
    """The resource pattern a notification under `changes_path` names."""
    try:
        if changes_path == ACL_LITERAL_CHANGES:
            kind, sep, name = data.decode().partition(":")
            if not sep:
                raise AclError(f"expected <ResourceType>:<name>, got {data!r}")
            return ResourcePattern(resource_type_of(kind), name, PatternType.LITERAL)
        value = _load(data, "ACL change notification")
        return ResourcePattern(
            resource_type_of(value["resourceType"]),
            value["name"],
            pattern_type_of(value["patternType"]),
        )
    except (AclError, KeyError, TypeError, UnicodeDecodeError) as exc:
        raise ZkDataError(f"ACL change notification {data!r}: {exc}") from None
