"""Administration: topics (create, delete, list, describe, more partitions), consumer
groups (list, describe, committed offsets, alter offsets, delete groups and offsets), and
the cluster's operations (leader elections, partition reassignments, configs, the
cluster and its log dirs), users' SCRAM credentials, and ACLs (create, describe, delete:
broker/security/acl.py's AclBinding and AclBindingFilter; asked of any broker, each
follows the same store).

create_topics, delete_topics and delete_groups return the outcome of every topic or group
as an ErrorCode (NONE on success) so a caller can treat TOPIC_ALREADY_EXISTS as fine;
with `raise_errors=True` any failure raises TopicErrors, whose `.errors` maps each failed
name to (ErrorCode, the broker's message). The messages are also kept, for the last
call, in `AdminClient.last_errors`. The group requests go to the group's coordinator
(`broker/client/coordinator.py`, which follows it when it moves). Requests Kafka's admin
client sends to the controller go there (NOT_CONTROLLER, as a request's or an item's
error code, refreshes the metadata and tries again); a broker's configs and log dirs are
asked of that broker. A request-level refusal is raised as its `broker.protocol.errors`
exception.
"""

from __future__ import annotations

import enum
import secrets
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import NamedTuple

from broker.client.cluster import ClusterMetadata
from broker.client.connection import UNREACHABLE
from broker.client.coordinator import (
    COORDINATOR_ERRORS,
    TRANSACTION_KEY_TYPE,
    GroupCoordinators,
)
from broker.client.security import SecurityConfig
from broker.cluster import Node
from broker.protocol.apis import (
    ALTER_CONFIGS,
    ALTER_PARTITION_REASSIGNMENTS,
    ALTER_USER_SCRAM_CREDENTIALS,
    CREATE_ACLS,
    CREATE_PARTITIONS,
    CREATE_TOPICS,
    DELETE_ACLS,
    DELETE_GROUPS,
    DELETE_TOPICS,
    DESCRIBE_ACLS,
    DESCRIBE_CLUSTER,
    DESCRIBE_CONFIGS,
    DESCRIBE_GROUPS,
    DESCRIBE_LOG_DIRS,
    DESCRIBE_PRODUCERS,
    DESCRIBE_TRANSACTIONS,
    DESCRIBE_USER_SCRAM_CREDENTIALS,
    ELECT_LEADERS,
    INCREMENTAL_ALTER_CONFIGS,
    LIST_GROUPS,
    LIST_PARTITION_REASSIGNMENTS,
    LIST_TRANSACTIONS,
    OFFSET_COMMIT,
    OFFSET_DELETE,
    OFFSET_FETCH,
    WRITE_TXN_MARKERS,
)
from broker.protocol.consumer_protocol import decode_assignment
from broker.protocol.errors import (
    ErrorCode,
    KafkaError,
    NetworkError,
    TopicErrors,
    UnknownTopicOrPartitionError,
    UnsupportedVersionError,
    as_error_code,
    error_for,
)
from broker.protocol.types import DecodeError
from broker.security.acl import AclBinding, AclBindingFilter
from broker.security.acl_wire import binding_from_fields, binding_to_wire, filter_to_wire
from broker.security.scram import (
    MAX_ITERATIONS,
    MECHANISMS,
    MECHANISMS_BY_CODE,
    salted_password,
)

_BACKOFF_S = 0.1
CONSUMER_PROTOCOL_TYPE = "consumer"
# OffsetCommit answers that concern the group, not a partition. An admin commit (generation
# -1, no member id) is refused with the first four while the group has members.
_ACTIVE_GROUP_ERRORS = frozenset(
    {
        ErrorCode.UNKNOWN_MEMBER_ID,
        ErrorCode.ILLEGAL_GENERATION,
        ErrorCode.REBALANCE_IN_PROGRESS,
        ErrorCode.FENCED_INSTANCE_ID,
    }
)
_GROUP_COMMIT_ERRORS = _ACTIVE_GROUP_ERRORS | {
    ErrorCode.INVALID_GROUP_ID,
    ErrorCode.GROUP_AUTHORIZATION_FAILED,
}


@dataclass
class NewTopic:
    name: str
    num_partitions: int
    # -1: the broker's default.replication.factor (what Kafka's admin clients leave empty).
    replication_factor: int = -1
    configs: dict[str, str] = field(default_factory=dict)
    # partition -> replicas, chosen by the caller (num_partitions and replication_factor
    # are then sent as -1, as Kafka's admin client does); None: the broker places them.
    replica_assignment: dict[int, list[int]] | None = None


class PartitionInfo(NamedTuple):
    partition: int
    leader: int
    replicas: list[int]
    isr: list[int]


class TopicDescription(NamedTuple):
    name: str
    partitions: list[PartitionInfo]


class GroupListing(NamedTuple):
    group_id: str
    protocol_type: str  # "consumer" for consumer groups; "" for groups that only commit
    state: str | None  # Kafka's state name; None from a broker below ListGroups v4


class MemberDescription(NamedTuple):
    member_id: str
    group_instance_id: str | None
    client_id: str
    host: str
    # (topic, partition) pairs decoded from the consumer protocol; [] when the group is
    # not Stable (the broker shows assignments of Stable groups only) or not a consumer
    # group; None when the bytes are not a consumer-protocol assignment.
    assignment: list[tuple[str, int]] | None


class GroupDescription(NamedTuple):
    group_id: str
    state: str  # "Dead" for a group the coordinator does not have
    protocol_type: str
    protocol: str  # the assignor chosen (consumer groups), "" unless Stable
    members: list[MemberDescription]
    coordinator: Node


class OffsetAndMetadata(NamedTuple):
    offset: int
    leader_epoch: int = -1
    metadata: str = ""


class NewPartitions(NamedTuple):
    total_count: int  # the topic's partition count afterwards (never fewer than now)
    # Replicas of each added partition, in order; None: the brokers place them.
    assignments: list[list[int]] | None = None


class ElectionType(enum.IntEnum):
    PREFERRED = 0  # the first replica leads again, if it is live and in sync
    UNCLEAN = 1  # any live replica of a partition without a leader (writes may be lost)


class PartitionReassignment(NamedTuple):
    replicas: list[int]  # the partition's replicas now: the target plus those leaving
    adding_replicas: list[int]
    removing_replicas: list[int]


class ConfigResourceType(enum.IntEnum):
    TOPIC = 2
    BROKER = 4  # name "": the cluster-wide default of every broker


class ConfigResource(NamedTuple):
    type: ConfigResourceType
    name: str

    def __str__(self) -> str:
        if self.type == ConfigResourceType.BROKER and self.name == "":
            return "default broker config"
        return f"{self.type.name.lower()} {self.name}"


class ConfigSource(enum.IntEnum):
    """Where a value in force comes from (DescribeConfigs v1+), Kafka's names."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5


class ConfigSynonym(NamedTuple):
    name: str
    value: str | None
    source: ConfigSource


class ConfigEntry(NamedTuple):
    name: str
    value: str | None  # None for a sensitive value
    source: ConfigSource
    read_only: bool
    sensitive: bool
    synonyms: list[ConfigSynonym]  # what the value overrides, the one in force first


class AlterConfigOp(NamedTuple):
    name: str
    op: str  # SET, DELETE, APPEND, SUBTRACT (the last two on list keys)
    value: str | None = None


ALTER_CONFIG_OPS = {"SET": 0, "DELETE": 1, "APPEND": 2, "SUBTRACT": 3}


class ClusterDescription(NamedTuple):
    cluster_id: str
    controller_id: int  # -1 while there is none
    brokers: list[Node]  # the live brokers, by id


class ReplicaInfo(NamedTuple):
    size: int  # bytes
    offset_lag: int  # how far the log end is behind the high watermark (0 on a leader)
    is_future: bool


class LogDirDescription(NamedTuple):
    error: ErrorCode
    replicas: dict[tuple[str, int], ReplicaInfo]
    total_bytes: int  # -1 when the broker does not say (DescribeLogDirs below v4)
    usable_bytes: int


class ScramCredentialInfo(NamedTuple):
    mechanism: str  # SCRAM-SHA-256 or SCRAM-SHA-512
    iterations: int


class UserScramCredentialUpsertion(NamedTuple):
    """Set `user`'s credential for `mechanism`: the password is salted here (a fresh
    random salt unless given) and only the salted password is sent."""

    user: str
    mechanism: str
    password: str
    iterations: int = 4096
    salt: bytes | None = None


class UserScramCredentialDeletion(NamedTuple):
    user: str
    mechanism: str


class ProducerState(NamedTuple):
    """A producer as a partition's leader knows it (DescribeProducers)."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int  # -1: no marker of this producer written here yet
    current_txn_start_offset: int  # -1: no transaction open here


class TransactionListing(NamedTuple):
    transactional_id: str
    producer_id: int
    state: str  # Kafka's name: Ongoing, PrepareCommit, CompleteAbort, ...
    coordinator_id: int


class TransactionDescription(NamedTuple):
    coordinator_id: int
    transactional_id: str
    state: str
    timeout_ms: int
    start_time_ms: int  # -1: no transaction open
    producer_id: int
    producer_epoch: int
    partitions: list[tuple[str, int]]


class AdminClient:
    def __init__(
        self,
        bootstrap_servers: str | list[str],
        client_id: str = "kafka-hourly",
        request_timeout_ms: int = 30000,
        security: SecurityConfig | None = None,
    ):
        self.timeout_s = request_timeout_ms / 1000
        self.cluster = ClusterMetadata(bootstrap_servers, client_id, self.timeout_s, security)
        self.coordinators = GroupCoordinators(self.cluster, self.timeout_s)
        self.txn_coordinators = GroupCoordinators(
            self.cluster, self.timeout_s, key_type=TRANSACTION_KEY_TYPE
        )
        self.last_errors: dict[str | tuple[str, int], tuple[ErrorCode, str | None]] = {}

    def close(self) -> None:
        self.cluster.close()

    def __enter__(self) -> AdminClient:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def create_topics(
        self,
        topics: list[NewTopic],
        timeout_ms: int = 30000,
        validate_only: bool = False,
        raise_errors: bool = False,
    ) -> dict[str, ErrorCode]:
        """Create topics; returns name -> ErrorCode (see the module docstring).

        Waits (up to timeout_ms) until created topics show leaders in the metadata, so
        they can be produced to right away.
        """
        body = {
            "topics": [
                {
                    "name": t.name,
                    "num_partitions": -1 if t.replica_assignment else t.num_partitions,
                    "replication_factor": -1 if t.replica_assignment else t.replication_factor,
                    "assignments": [
                        {"partition_index": p, "broker_ids": list(r)}
                        for p, r in sorted((t.replica_assignment or {}).items())
                    ],
                    "configs": [{"name": k, "value": v} for k, v in t.configs.items()],
                }
                for t in topics
            ],
            "timeout_ms": timeout_ms,
            "validate_only": validate_only,
        }
        response = self._controller_request(CREATE_TOPICS, body)
        outcome = {
            t["name"]: (as_error_code(t["error_code"]), t["error_message"])
            for t in response["topics"]
        }
        created = [n for n, (code, _) in outcome.items() if code == ErrorCode.NONE]
        if created and not validate_only:
            self.cluster.wait_for_leaders(created, timeout_ms / 1000)
        return self._report("create topics", outcome, raise_errors)

    def delete_topics(
        self, names: list[str], timeout_ms: int = 30000, raise_errors: bool = False
    ) -> dict[str, ErrorCode]:
        """Delete topics; returns name -> ErrorCode (see the module docstring)."""
        body = {"topic_names": list(names), "timeout_ms": timeout_ms}
        response = self._controller_request(DELETE_TOPICS, body)
        outcome = {r["name"]: (as_error_code(r["error_code"]), None) for r in response["responses"]}
        for name in names:
            self.cluster.topics.pop(name, None)
        return self._report("delete topics", outcome, raise_errors)

    def list_topics(self) -> list[str]:
        """Names of every topic in the cluster, sorted."""
        self.cluster.refresh()
        return sorted(self.cluster.topics)

    def describe_topics(self, names: list[str] | None = None) -> dict[str, TopicDescription]:
        """Partitions, leaders, replicas and ISR of `names` (None: every topic).

        Raises UnknownTopicOrPartitionError naming the topics that do not exist.
        """
        errors = self.cluster.refresh(None if names is None else list(names))
        missing = [
            n for n in (names or []) if n not in self.cluster.topics or errors.get(n, 0) != 0
        ]
        if missing:
            raise UnknownTopicOrPartitionError(f"no such topic(s): {', '.join(missing)}")
        wanted = sorted(self.cluster.topics) if names is None else names
        out = {}
        for name in wanted:
            meta = self.cluster.topics[name]
            out[name] = TopicDescription(
                name,
                [
                    PartitionInfo(p.partition, p.leader, p.replicas, p.isr)
                    for p in sorted(meta.partitions.values())
                ],
            )
        return out

    def create_partitions(
        self,
        new_partitions: dict[str, int | NewPartitions],
        timeout_ms: int = 30000,
        validate_only: bool = False,
        raise_errors: bool = False,
    ) -> dict[str, ErrorCode]:
        """Grow topics to a partition count (an int, or NewPartitions naming the added
        partitions' replicas); returns name -> ErrorCode (INVALID_PARTITIONS for a count
        that is not larger; see the module docstring). Waits (up to timeout_ms) until the
        new partitions show leaders in the metadata."""
        asked = {
            name: n if isinstance(n, NewPartitions) else NewPartitions(n)
            for name, n in new_partitions.items()
        }
        body = {
            "topics": [
                {
                    "name": name,
                    "count": n.total_count,
                    "assignments": None
                    if n.assignments is None
                    else [{"broker_ids": list(r)} for r in n.assignments],
                }
                for name, n in asked.items()
            ],
            "timeout_ms": timeout_ms,
            "validate_only": validate_only,
        }
        response = self._controller_request(CREATE_PARTITIONS, body)
        outcome = {
            r["name"]: (as_error_code(r["error_code"]), r["error_message"])
            for r in response["results"]
        }
        grown = [n for n, (code, _) in outcome.items() if code == ErrorCode.NONE]
        if grown and not validate_only:
            self.cluster.wait_for_leaders(grown, timeout_ms / 1000)
        return self._report("create partitions", outcome, raise_errors)

    # --- consumer groups ----------------------------------------------------------

    def list_groups(self, states: Iterable[str] | None = None) -> list[GroupListing]:
        """Every group in the cluster, sorted by id: ListGroups to every broker (each
        lists the groups it coordinates), merged. `states` (Kafka's names, any case)
        keeps only groups in those states; it needs ListGroups v4.
        """
        wanted = sorted(set(states or ()))
        self.cluster.refresh([])
        found: dict[str, GroupListing] = {}
        for node in sorted(self.cluster.brokers):
            for listing in self._list_groups_at(node, wanted):
                found[listing.group_id] = listing
        return [found[g] for g in sorted(found)]

    def describe_groups(self, group_ids: Iterable[str]) -> dict[str, GroupDescription]:
        """State, assignor and members (with their decoded assignments) of each group,
        asked of its coordinator. A group that does not exist is described as Dead with
        no members, as Kafka's DescribeGroups answers; other errors are raised."""
        out: dict[str, GroupDescription] = {}
        for group_id in group_ids:
            body = {"groups": [group_id], "include_authorized_operations": False}
            response = self.coordinators.request(
                group_id,
                DESCRIBE_GROUPS,
                body,
                lambda r: [g["error_code"] for g in r["groups"]],
            )
            (described,) = response["groups"]
            if described["error_code"] != ErrorCode.NONE:
                raise error_for(described["error_code"], f"describe group {group_id!r}")
            consumer = described["protocol_type"] == CONSUMER_PROTOCOL_TYPE
            members = [
                MemberDescription(
                    m["member_id"],
                    m["group_instance_id"],
                    m["client_id"],
                    m["client_host"],
                    _assigned_partitions(m["member_assignment"]) if consumer else [],
                )
                for m in described["members"]
            ]
            out[group_id] = GroupDescription(
                group_id,
                described["group_state"],
                described["protocol_type"],
                described["protocol_data"],
                members,
                self.coordinators.info(group_id),
            )
        return out

    def list_group_offsets(
        self, group_id: str, partitions: Iterable[tuple[str, int]] | None = None
    ) -> dict[tuple[str, int], OffsetAndMetadata]:
        """The group's committed offsets: of `partitions`, or of every partition it has
        committed (None). Partitions without a committed offset are left out."""
        asked = None if partitions is None else _by_topic((tp, None) for tp in partitions)

        def body(version: int) -> dict:
            if asked is None and version < 2:
                raise UnsupportedVersionError(
                    f"OffsetFetch v{version} cannot ask for every partition (v2+ can)"
                )
            topics = (
                None
                if asked is None
                else [
                    {"name": t, "partition_indexes": [p for p, _ in ps]} for t, ps in asked.items()
                ]
            )
            return {"group_id": group_id, "topics": topics, "require_stable": False}

        response = self.coordinators.request(
            group_id,
            OFFSET_FETCH,
            body,
            lambda r: [r["error_code"], *_partition_codes(r).values()],
        )
        if response["error_code"] != ErrorCode.NONE:
            raise error_for(response["error_code"], f"committed offsets of {group_id!r}")
        out: dict[tuple[str, int], OffsetAndMetadata] = {}
        for t in response["topics"]:
            for p in t["partitions"]:
                tp = (t["name"], p["partition_index"])
                if p["error_code"] != ErrorCode.NONE:
                    raise error_for(p["error_code"], f"committed offset of {tp[0]}-{tp[1]}")
                if p["committed_offset"] >= 0:
                    out[tp] = OffsetAndMetadata(
                        p["committed_offset"], p["committed_leader_epoch"], p["metadata"] or ""
                    )
        return out

    def alter_group_offsets(
        self,
        group_id: str,
        offsets: dict[tuple[str, int], int | OffsetAndMetadata],
        raise_errors: bool = False,
    ) -> dict[tuple[str, int], ErrorCode]:
        """Commit `offsets` for the group as an administrator (generation -1, no member),
        which the coordinator accepts only while the group has no members (as Kafka's).

        Returns (topic, partition) -> ErrorCode (see the module docstring). A refusal of
        the whole group (it has members, or the group id is invalid) is raised.
        """
        body = {
            "group_id": group_id,
            "generation_id_or_member_epoch": -1,
            "member_id": "",
            "group_instance_id": None,
            "retention_time_ms": -1,
            "topics": [
                {
                    "name": topic,
                    "partitions": [
                        {
                            "partition_index": p,
                            "committed_offset": o.offset,
                            "committed_leader_epoch": o.leader_epoch,
                            "committed_metadata": o.metadata,
                        }
                        for p, o in parts
                    ],
                }
                for topic, parts in _by_topic(
                    (tp, o if isinstance(o, OffsetAndMetadata) else OffsetAndMetadata(o))
                    for tp, o in offsets.items()
                ).items()
            ],
        }
        response = self.coordinators.request(
            group_id, OFFSET_COMMIT, body, lambda r: _partition_codes(r).values()
        )
        codes = _partition_codes(response)
        for code in codes.values():
            if code in _GROUP_COMMIT_ERRORS:
                detail = f"altering the offsets of group {group_id!r}"
                if code in _ACTIVE_GROUP_ERRORS:
                    detail += ": the group has active members; offsets can only be altered while it is empty"
                raise error_for(code, detail)
        outcome = {tp: (code, None) for tp, code in codes.items()}
        return self._report(f"alter offsets of group {group_id!r}", outcome, raise_errors)

    def delete_groups(
        self, group_ids: Iterable[str], raise_errors: bool = False
    ) -> dict[str, ErrorCode]:
        """Delete groups and their committed offsets; returns group -> ErrorCode (see the
        module docstring): NON_EMPTY_GROUP while it has members, GROUP_ID_NOT_FOUND."""
        outcome: dict[str, tuple[ErrorCode, str | None]] = {}
        for group_id in group_ids:
            response = self.coordinators.request(
                group_id,
                DELETE_GROUPS,
                {"groups_names": [group_id]},
                lambda r: [g["error_code"] for g in r["results"]],
            )
            (result,) = response["results"]
            outcome[group_id] = (as_error_code(result["error_code"]), None)
        return self._report("delete groups", outcome, raise_errors)

    def delete_group_offsets(
        self, group_id: str, partitions: Iterable[tuple[str, int]], raise_errors: bool = False
    ) -> dict[tuple[str, int], ErrorCode]:
        """Forget the group's committed offsets of `partitions`; returns (topic, partition)
        -> ErrorCode (GROUP_SUBSCRIBED_TO_TOPIC for topics its members consume). Errors of
        the whole group (GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP, ...) are raised."""
        body = {
            "group_id": group_id,
            "topics": [
                {"name": t, "partitions": [{"partition_index": p} for p, _ in ps]}
                for t, ps in _by_topic((tp, None) for tp in partitions).items()
            ],
        }
        response = self.coordinators.request(
            group_id,
            OFFSET_DELETE,
            body,
            lambda r: [r["error_code"], *_partition_codes(r).values()],
        )
        if response["error_code"] != ErrorCode.NONE:
            raise error_for(response["error_code"], f"deleting offsets of group {group_id!r}")
        outcome = {tp: (code, None) for tp, code in _partition_codes(response).items()}
        return self._report(f"delete offsets of group {group_id!r}", outcome, raise_errors)

    def _list_groups_at(self, node: int, states: list[str]) -> list[GroupListing]:
        """ListGroups at one broker, retrying a loading or unavailable coordinator and a
        lost connection until the timeout."""
        deadline = time.monotonic() + self.timeout_s
        while True:
            try:
                conn = self.cluster.connection(node)
                version = conn.version_for(LIST_GROUPS)
                if states and version < 4:
                    raise UnsupportedVersionError(
                        f"broker {node} speaks ListGroups v{version}: filtering by state needs v4"
                    )
                response = conn.request(LIST_GROUPS, {"states_filter": states}, version)
            except UNREACHABLE as exc:
                self.cluster.drop_connection(node)
                failure: KafkaError = exc
            else:
                code = as_error_code(response["error_code"])
                if code == ErrorCode.NONE:
                    return [
                        GroupListing(
                            g["group_id"],
                            g["protocol_type"],
                            g["group_state"] if version >= 4 else None,
                        )
                        for g in response["groups"]
                    ]
                failure = error_for(code, f"list groups at broker {node}")
                if code not in COORDINATOR_ERRORS:
                    raise failure
            if time.monotonic() + _BACKOFF_S > deadline:
                raise failure
            time.sleep(_BACKOFF_S)

    # --- cluster operations ---------------------------------------------------------

    def elect_leaders(
        self,
        election_type: ElectionType | int = ElectionType.PREFERRED,
        partitions: Iterable[tuple[str, int]] | None = None,
        timeout_ms: int = 30000,
        raise_errors: bool = False,
    ) -> dict[tuple[str, int], ErrorCode]:
        """Elect leaders (at the controller) of `partitions`, or of every partition (None:
        the answer then leaves out those that needed no election). Returns (topic,
        partition) -> ErrorCode: NONE elected, ELECTION_NOT_NEEDED (the preferred
        replica leads already), PREFERRED_LEADER_NOT_AVAILABLE, ELIGIBLE_LEADERS_NOT_AVAILABLE,
        UNKNOWN_TOPIC_OR_PARTITION, with the broker's messages in `last_errors`."""
        election_type = ElectionType(election_type)
        asked = None if partitions is None else _by_topic((tp, None) for tp in partitions)

        def body(version: int) -> dict:
            if election_type != ElectionType.PREFERRED and version < 1:
                raise UnsupportedVersionError(
                    f"ElectLeaders v{version} elects preferred leaders only (unclean needs v1)"
                )
            return {
                "election_type": int(election_type),
                "topic_partitions": None
                if asked is None
                else [{"topic": t, "partitions": [p for p, _ in ps]} for t, ps in asked.items()],
                "timeout_ms": timeout_ms,
            }

        response = self._controller_request(ELECT_LEADERS, body)
        _raise_request_error(response, f"{election_type.name.lower()} leader election")
        outcome = {
            (t["topic"], p["partition_id"]): (as_error_code(p["error_code"]), p["error_message"])
            for t in response["replica_election_results"]
            for p in t["partition_result"]
        }
        return self._report(f"{election_type.name.lower()} leader election", outcome, raise_errors)

    def alter_partition_reassignments(
        self,
        reassignments: dict[tuple[str, int], list[int] | None],
        timeout_ms: int = 30000,
        raise_errors: bool = False,
    ) -> dict[tuple[str, int], ErrorCode]:
        """Move partitions to new replicas (the first is the preferred leader), or cancel a
        move under way (None), at the controller; the moves go on after the answer (see
        list_partition_reassignments). Returns (topic, partition) -> ErrorCode: each
        partition is checked on its own (UNKNOWN_TOPIC_OR_PARTITION,
        INVALID_REPLICA_ASSIGNMENT, NO_REASSIGNMENT_IN_PROGRESS), messages in
        `last_errors`."""
        body = {
            "timeout_ms": timeout_ms,
            "topics": [
                {
                    "name": t,
                    "partitions": [
                        {
                            "partition_index": p,
                            "replicas": None if replicas is None else list(replicas),
                        }
                        for p, replicas in ps
                    ],
                }
                for t, ps in _by_topic(reassignments.items()).items()
            ],
        }
        response = self._controller_request(ALTER_PARTITION_REASSIGNMENTS, body)
        _raise_request_error(response, "alter partition reassignments")
        outcome = {
            (t["name"], p["partition_index"]): (
                as_error_code(p["error_code"]),
                p["error_message"],
            )
            for t in response["responses"]
            for p in t["partitions"]
        }
        return self._report("alter partition reassignments", outcome, raise_errors)

    def list_partition_reassignments(
        self, partitions: Iterable[tuple[str, int]] | None = None, timeout_ms: int = 30000
    ) -> dict[tuple[str, int], PartitionReassignment]:
        """The moves under way (of `partitions`, or all), asked of the controller; a
        partition that is not moving is left out."""
        asked = None if partitions is None else _by_topic((tp, None) for tp in partitions)
        body = {
            "timeout_ms": timeout_ms,
            "topics": None
            if asked is None
            else [{"name": t, "partition_indexes": [p for p, _ in ps]} for t, ps in asked.items()],
        }
        response = self._controller_request(LIST_PARTITION_REASSIGNMENTS, body)
        _raise_request_error(response, "list partition reassignments")
        return {
            (t["name"], p["partition_index"]): PartitionReassignment(
                list(p["replicas"]), list(p["adding_replicas"]), list(p["removing_replicas"])
            )
            for t in response["topics"]
            for p in t["partitions"]
        }

    def describe_configs(
        self, resources: Iterable[ConfigResource], include_synonyms: bool = True
    ) -> dict[ConfigResource, list[ConfigEntry]]:
        """Every key of each resource with its value in force, where that comes from and
        (with synonyms) what it overrides. A broker's resource is asked of that broker,
        topics and the broker default of any. A resource the broker refuses (a topic that
        does not exist: UnknownTopicOrPartitionError) is raised."""
        out: dict[ConfigResource, list[ConfigEntry]] = {}
        for resource in resources:
            body = {
                "resources": [
                    {
                        "resource_type": int(resource.type),
                        "resource_name": resource.name,
                        "configuration_keys": None,
                    }
                ],
                "include_synonyms": include_synonyms,
                "include_documentation": False,
            }
            response = self._broker_request(_config_node(resource), DESCRIBE_CONFIGS, body)
            (result,) = response["results"]
            if result["error_code"] != ErrorCode.NONE:
                raise error_for(
                    result["error_code"],
                    result["error_message"] or f"describe configs of {resource}",
                )
            out[resource] = [_config_entry(c) for c in result["configs"]]
        return out

    def alter_configs(
        self,
        configs: dict[ConfigResource, dict[str, str]],
        validate_only: bool = False,
        raise_errors: bool = False,
    ) -> dict[ConfigResource, ErrorCode]:
        """Replace each resource's whole set of dynamic configs (AlterConfigs: keys left
        out go back to their defaults). Returns resource -> ErrorCode (see the module
        docstring); prefer incremental_alter_configs."""

        def entries(values: dict[str, str]) -> list[dict]:
            return [{"name": k, "value": v} for k, v in values.items()]

        return self._alter_configs(
            ALTER_CONFIGS, "alter configs", configs, entries, validate_only, raise_errors
        )

    def incremental_alter_configs(
        self,
        operations: dict[ConfigResource, list[AlterConfigOp]],
        validate_only: bool = False,
        raise_errors: bool = False,
    ) -> dict[ConfigResource, ErrorCode]:
        """SET, DELETE (back to the inherited value), APPEND or SUBTRACT (list keys) keys of
        each resource; the rest stays. All or nothing per resource. Returns resource ->
        ErrorCode (see the module docstring)."""
        for ops in operations.values():
            for op in ops:
                if op.op not in ALTER_CONFIG_OPS:
                    raise ValueError(
                        f"config operation {op.op!r} for {op.name!r}: expected one of "
                        f"{', '.join(ALTER_CONFIG_OPS)}"
                    )

        def entries(ops: list[AlterConfigOp]) -> list[dict]:
            return [
                {"name": o.name, "config_operation": ALTER_CONFIG_OPS[o.op], "value": o.value}
                for o in ops
            ]

        return self._alter_configs(
            INCREMENTAL_ALTER_CONFIGS,
            "incremental alter configs",
            operations,
            entries,
            validate_only,
            raise_errors,
        )

    def describe_cluster(self) -> ClusterDescription:
        """The cluster id, the controller and the live brokers (DescribeCluster)."""
        body = {"include_cluster_authorized_operations": False, "endpoint_type": 1}
        response = self._broker_request(None, DESCRIBE_CLUSTER, body)
        _raise_request_error(response, "describe cluster")
        brokers = [
            Node(b["broker_id"], b["host"], b["port"], b["rack"]) for b in response["brokers"]
        ]
        return ClusterDescription(
            response["cluster_id"], response["controller_id"], sorted(brokers)
        )

    def describe_log_dirs(
        self,
        broker_ids: Iterable[int] | None = None,
        partitions: Iterable[tuple[str, int]] | None = None,
    ) -> dict[int, dict[str, LogDirDescription]]:
        """broker -> log dir -> its replicas (of `partitions`, or all) with their sizes and
        offset lags; each broker of `broker_ids` (None: every live one) is asked itself."""
        if broker_ids is None:
            self.cluster.refresh([])
            broker_ids = sorted(self.cluster.brokers)
        asked = None if partitions is None else _by_topic((tp, None) for tp in partitions)
        body = {
            "topics": None
            if asked is None
            else [{"topic": t, "partitions": [p for p, _ in ps]} for t, ps in asked.items()]
        }
        out: dict[int, dict[str, LogDirDescription]] = {}
        for node in broker_ids:
            response = self._broker_request(node, DESCRIBE_LOG_DIRS, body)
            _raise_request_error(response, f"describe log dirs of broker {node}")
            out[node] = {
                d["log_dir"]: LogDirDescription(
                    as_error_code(d["error_code"]),
                    {
                        (t["name"], p["partition_index"]): ReplicaInfo(
                            p["partition_size"], p["offset_lag"], p["is_future_key"]
                        )
                        for t in d["topics"]
                        for p in t["partitions"]
                    },
                    d["total_bytes"],
                    d["usable_bytes"],
                )
                for d in response["results"]
            }
        return out

    # --- SCRAM credentials ------------------------------------------------------------

    def describe_user_scram_credentials(
        self, users: Iterable[str] | None = None
    ) -> dict[str, list[ScramCredentialInfo]]:
        """user -> its SCRAM mechanisms and iterations (never a secret); None: every user
        with a credential. A user asked for by name that has none is raised
        (ResourceNotFoundError), as Kafka's admin client does."""
        body = {"users": None if users is None else [{"name": u} for u in users]}
        response = self._broker_request(None, DESCRIBE_USER_SCRAM_CREDENTIALS, body)
        _raise_request_error(response, "describe user SCRAM credentials")
        out: dict[str, list[ScramCredentialInfo]] = {}
        for result in response["results"]:
            if result["error_code"] != ErrorCode.NONE:
                raise error_for(
                    result["error_code"], result["error_message"] or f"user {result['user']}"
                )
            out[result["user"]] = [
                ScramCredentialInfo(_mechanism_name(i["mechanism"]), i["iterations"])
                for i in result["credential_infos"]
            ]
        return out

    def alter_user_scram_credentials(
        self,
        alterations: Iterable[UserScramCredentialUpsertion | UserScramCredentialDeletion],
        raise_errors: bool = False,
    ) -> dict[str, ErrorCode]:
        """Upsert and delete credentials; returns user -> ErrorCode (see the module
        docstring: RESOURCE_NOT_FOUND deleting what is not there, UNACCEPTABLE_CREDENTIAL
        for iterations outside 4096-16384, DUPLICATE_RESOURCE for one user and mechanism
        twice). A user with a refused item keeps its credentials untouched."""
        body = scram_alteration_request(alterations)
        response = self._broker_request(None, ALTER_USER_SCRAM_CREDENTIALS, body)
        outcome = {
            r["user"]: (as_error_code(r["error_code"]), r["error_message"])
            for r in response["results"]
        }
        return self._report("alter user SCRAM credentials", outcome, raise_errors)

    # --- ACLs -------------------------------------------------------------------------

    def create_acls(
        self, bindings: list[AclBinding], raise_errors: bool = False
    ) -> dict[AclBinding, ErrorCode]:
        """Create ACLs (one already there is fine); returns binding -> ErrorCode (see the
        module docstring)."""
        body = {"creations": [binding_to_wire(b) for b in bindings]}
        response = self._broker_request(None, CREATE_ACLS, body)
        outcome = {
            b: (as_error_code(r["error_code"]), r["error_message"])
            for b, r in zip(bindings, response["results"], strict=True)
        }
        return self._report("create ACLs", outcome, raise_errors)

    def describe_acls(self, acl_filter: AclBindingFilter | None = None) -> list[AclBinding]:
        """The ACLs the filter matches (None: every ACL). Raises the broker's refusal
        (SecurityDisabledError without an authorizer, ClusterAuthorizationFailedError)."""
        body = filter_to_wire(acl_filter or AclBindingFilter())
        response = self._broker_request(None, DESCRIBE_ACLS, body)
        _raise_request_error(response, "describe ACLs")
        return [binding_from_fields(r, a) for r in response["resources"] for a in r["acls"]]

    def delete_acls(
        self, filters: list[AclBindingFilter], raise_errors: bool = False
    ) -> list[list[AclBinding]]:
        """Delete the ACLs each filter matches; per filter, the ACLs deleted. A filter's
        failure leaves its list empty, its error in `last_errors` (raised with
        `raise_errors`)."""
        body = {"filters": [filter_to_wire(f) for f in filters]}
        response = self._broker_request(None, DELETE_ACLS, body)
        results = response["filter_results"]
        self._report(
            "delete ACLs",
            {
                f: (as_error_code(r["error_code"]), r["error_message"])
                for f, r in zip(filters, results, strict=True)
            },
            raise_errors,
        )
        return [[binding_from_fields(m, m) for m in r["matching_acls"]] for r in results]

    def _alter_configs(
        self, api_key: int, operation: str, changes: dict, entries, validate_only, raise_errors
    ) -> dict[ConfigResource, ErrorCode]:
        outcome: dict[ConfigResource, tuple[ErrorCode, str | None]] = {}
        for resource, change in changes.items():
            body = {
                "resources": [
                    {
                        "resource_type": int(resource.type),
                        "resource_name": resource.name,
                        "configs": entries(change),
                    }
                ],
                "validate_only": validate_only,
            }
            (result,) = self._broker_request(_config_node(resource), api_key, body)["responses"]
            outcome[resource] = (as_error_code(result["error_code"]), result["error_message"])
        return self._report(operation, outcome, raise_errors)

    # --- transactions (KIP-664) ---------------------------------------------------------

    def describe_producers(
        self, partitions: Iterable[tuple[str, int]]
    ) -> dict[tuple[str, int], list[ProducerState]]:
        """The active producers of each partition, asked of its leader; a partition's
        error is raised (NOT_LEADER_OR_FOLLOWER after a metadata refresh and retry)."""
        wanted = list(partitions)
        self.cluster.refresh(sorted({t for t, _ in wanted}))
        by_leader: dict[int, list[tuple[str, int]]] = {}
        for tp in wanted:
            by_leader.setdefault(self.cluster.leader_for(*tp), []).append(tp)
        out: dict[tuple[str, int], list[ProducerState]] = {}
        for node, tps in by_leader.items():
            body = {
                "topics": [
                    {"name": t, "partition_indexes": [p for p, _ in ps]}
                    for t, ps in _by_topic((tp, None) for tp in tps).items()
                ]
            }
            response = self._broker_request(node, DESCRIBE_PRODUCERS, body)
            for topic in response["topics"]:
                for p in topic["partitions"]:
                    tp = (topic["name"], p["partition_index"])
                    if p["error_code"] != ErrorCode.NONE:
                        raise error_for(
                            p["error_code"],
                            p["error_message"] or f"describe producers of {_label(tp)}",
                        )
                    out[tp] = [ProducerState(**s) for s in p["active_producers"]]
        return out

    def list_transactions(
        self,
        states: Iterable[str] = (),
        producer_ids: Iterable[int] = (),
        min_duration_ms: int = -1,
    ) -> list[TransactionListing]:
        """The transactional ids of every coordinator (ListTransactions to every broker,
        merged), filtered by Kafka's state names, producer ids and (v1) how long their
        transaction has been open."""
        body = {
            "state_filters": list(states),
            "producer_id_filters": list(producer_ids),
            "duration_filter": min_duration_ms,
        }
        self.cluster.refresh([])
        listed = []
        for node in sorted(self.cluster.brokers):
            if (
                min_duration_ms >= 0
                and self.cluster.connection(node).version_for(LIST_TRANSACTIONS) < 1
            ):
                raise UnsupportedVersionError(
                    f"broker {node} cannot filter transactions by duration (ListTransactions v1)"
                )
            response = self._broker_request(node, LIST_TRANSACTIONS, body)
            _raise_request_error(response, f"list transactions at broker {node}")
            listed += [
                TransactionListing(
                    t["transactional_id"], t["producer_id"], t["transaction_state"], node
                )
                for t in response["transaction_states"]
            ]
        return sorted(listed)

    def describe_transactions(
        self, transactional_ids: Iterable[str]
    ) -> dict[str, TransactionDescription]:
        """Each id's state at its coordinator; an id's error (TRANSACTIONAL_ID_NOT_FOUND,
        ...) is raised."""
        out = {}
        for txn_id in transactional_ids:
            response = self.txn_coordinators.request(
                txn_id,
                DESCRIBE_TRANSACTIONS,
                {"transactional_ids": [txn_id]},
                lambda r: [s["error_code"] for s in r["transaction_states"]],
            )
            (s,) = response["transaction_states"]
            if s["error_code"] != ErrorCode.NONE:
                raise error_for(s["error_code"], f"describe transactional id {txn_id!r}")
            out[txn_id] = TransactionDescription(
                self.txn_coordinators.node(txn_id),
                txn_id,
                s["transaction_state"],
                s["transaction_timeout_ms"],
                s["transaction_start_time_ms"],
                s["producer_id"],
                s["producer_epoch"],
                [(t["topic"], p) for t in s["topics"] for p in t["partitions"]],
            )
        return out

    def abort_transaction(
        self,
        partition: tuple[str, int],
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
    ) -> None:
        """Kafka's Admin.abortTransaction: an ABORT marker for the producer written by the
        partition's leader (WriteTxnMarkers, which needs CLUSTER_ACTION on the cluster),
        for a hanging transaction no coordinator will end. Its error is raised."""
        topic, index = partition
        self.cluster.refresh([topic])
        body = {
            "markers": [
                {
                    "producer_id": producer_id,
                    "producer_epoch": producer_epoch,
                    "transaction_result": False,
                    "topics": [{"name": topic, "partition_indexes": [index]}],
                    "coordinator_epoch": coordinator_epoch,
                }
            ]
        }
        response = self._broker_request(
            self.cluster.leader_for(topic, index), WRITE_TXN_MARKERS, body
        )
        for code in _error_codes(response):
            if code != ErrorCode.NONE:
                raise error_for(
                    code, f"abort transaction of producer {producer_id} on {_label(partition)}"
                )

    # --- helpers ------------------------------------------------------------------

    def _controller_request(self, api_key: int, body: dict | Callable[[int], dict]) -> dict:
        """Send to the controller, following it if it moves or restarts (unreachable, or
        NOT_CONTROLLER as the answer's or any item's error code), until the timeout.
        `body` may be a function of the version negotiated."""
        deadline = time.monotonic() + self.timeout_s
        while True:
            node = self.cluster.controller_id
            try:
                conn = (
                    self.cluster.connection(node)
                    if node in self.cluster.brokers
                    else self.cluster.any_connection()
                )
                version = conn.version_for(api_key)
                request = body(version) if callable(body) else body
                response = conn.request(api_key, request, version)
            except UNREACHABLE as exc:
                self.cluster.drop_connection(node)
                if time.monotonic() + _BACKOFF_S > deadline:
                    raise NetworkError(f"controller unreachable: {exc}") from exc
            else:
                if ErrorCode.NOT_CONTROLLER not in _error_codes(response):
                    return response
                if time.monotonic() + _BACKOFF_S > deadline:
                    raise error_for(ErrorCode.NOT_CONTROLLER, "no controller answered in time")
            time.sleep(_BACKOFF_S)
            try:
                self.cluster.refresh([])
            except NetworkError:
                pass

    def _broker_request(self, node: int | None, api_key: int, body: dict) -> dict:
        """Send to broker `node` (None: any live one), reconnecting after a lost
        connection until the timeout."""
        deadline = time.monotonic() + self.timeout_s
        while True:
            try:
                if node is None:
                    return self.cluster.any_connection().request(api_key, body)
                if node not in self.cluster.brokers:
                    self.cluster.refresh([])
                return self.cluster.connection(node).request(api_key, body)
            except UNREACHABLE as exc:
                if node is not None:
                    self.cluster.drop_connection(node)
                if time.monotonic() + _BACKOFF_S > deadline:
                    where = "no broker" if node is None else f"broker {node}"
                    raise NetworkError(f"{where} answered: {exc}") from exc
            time.sleep(_BACKOFF_S)
            try:
                self.cluster.refresh([])
            except NetworkError:
                pass

    def _report(self, operation: str, outcome: dict, raise_errors: bool) -> dict:
        """`outcome`: name (topic, group, or (topic, partition)) -> (ErrorCode, message)."""
        self.last_errors = {n: e for n, e in outcome.items() if e[0] != ErrorCode.NONE}
        if raise_errors and self.last_errors:
            raise TopicErrors(operation, {_label(n): e for n, e in self.last_errors.items()})
        return {name: code for name, (code, _) in outcome.items()}


def _label(name) -> str:
    """A topic, group, config resource or ACL as errors name it; (topic, partition) as
    topic-partition."""
    if isinstance(name, tuple) and not isinstance(name, ConfigResource):
        return f"{name[0]}-{name[1]}"
    return str(name)


def _error_codes(response: dict) -> list[int]:
    """Every error code in an answer: its own and its items' (at any depth)."""
    codes = []
    stack: list = [response]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if "error_code" in item:
                codes.append(item["error_code"])
            stack.extend(v for v in item.values() if isinstance(v, list))
        elif isinstance(item, list):
            stack.extend(v for v in item if isinstance(v, dict))
    return codes


def _raise_request_error(response: dict, operation: str) -> None:
    """Raise the answer's own error (not its items'), if it has one."""
    code = response.get("error_code", ErrorCode.NONE)
    if code != ErrorCode.NONE:
        raise error_for(code, response.get("error_message") or operation)


def scram_alteration_request(
    alterations: Iterable[UserScramCredentialUpsertion | UserScramCredentialDeletion],
) -> dict:
    """The AlterUserScramCredentials body of `alterations`: passwords salted here, so only
    salted passwords leave the client. An unknown mechanism name is a ValueError."""
    deletions, upsertions = [], []
    for change in alterations:
        mech = MECHANISMS.get(change.mechanism)
        if mech is None:
            raise ValueError(
                f"SCRAM mechanism {change.mechanism!r}: expected one of {', '.join(MECHANISMS)}"
            )
        if isinstance(change, UserScramCredentialDeletion):
            deletions.append({"name": change.user, "mechanism": mech.type_code})
            continue
        salt = change.salt or secrets.token_bytes(32)
        # Iterations the broker refuses anyway are not worked through here.
        salted = (
            salted_password(mech, change.password, salt, change.iterations)
            if 0 < change.iterations <= MAX_ITERATIONS
            else b""
        )
        upsertions.append(
            {
                "name": change.user,
                "mechanism": mech.type_code,
                "iterations": change.iterations,
                "salt": salt,
                "salted_password": salted,
            }
        )
    return {"deletions": deletions, "upsertions": upsertions}


def _mechanism_name(code: int) -> str:
    mech = MECHANISMS_BY_CODE.get(code)
    return mech.name if mech is not None else f"UNKNOWN({code})"


def _config_node(resource: ConfigResource) -> int | None:
    """Where a config request goes: a broker's own resource to that broker, else any."""
    if resource.type == ConfigResourceType.BROKER and resource.name != "":
        return int(resource.name)
    return None


def _config_entry(c: dict) -> ConfigEntry:
    source = c["config_source"]
    if source < 0:  # DescribeConfigs v0: only "default or not"
        source = ConfigSource.DEFAULT_CONFIG if c["is_default"] else ConfigSource.UNKNOWN
    return ConfigEntry(
        c["name"],
        c["value"],
        _source(source),
        c["read_only"],
        c["is_sensitive"],
        [ConfigSynonym(y["name"], y["value"], _source(y["source"])) for y in c["synonyms"]],
    )


def _source(code: int) -> ConfigSource:
    try:
        return ConfigSource(code)
    except ValueError:
        return ConfigSource.UNKNOWN


def _by_topic(pairs: Iterable[tuple[tuple[str, int], object]]) -> dict[str, list]:
    """((topic, partition), value) pairs grouped by topic, in first-seen order:
    topic -> [(partition, value)]."""
    out: dict[str, list] = {}
    for (topic, partition), value in pairs:
        out.setdefault(topic, []).append((partition, value))
    return out


def _partition_codes(response: dict) -> dict[tuple[str, int], ErrorCode]:
    """The per-partition error codes of an OffsetCommit, OffsetFetch or OffsetDelete answer."""
    return {
        (t["name"], p["partition_index"]): as_error_code(p["error_code"])
        for t in response["topics"]
        for p in t["partitions"]
    }


def _assigned_partitions(data: bytes) -> list[tuple[str, int]] | None:
    """A member's consumer-protocol assignment as (topic, partition) pairs; [] for none
    (no bytes: the group is not Stable), None for bytes that are not an assignment."""
    if not data:
        return []
    try:
        _, assignment = decode_assignment(bytes(data))
    except DecodeError:
        return None
    return [(t["topic"], p) for t in assignment["assigned_partitions"] for p in t["partitions"]]
