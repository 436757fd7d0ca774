"""Request and response declarations of every API the broker speaks.

Each API is declared once, as data, with Kafka's field names in snake_case and
Kafka's version ranges (facts from apache/kafka's
`clients/src/main/resources/common/message/<Name>{Request,Response}.json`).
Only fields that exist somewhere in our version range are declared; to support a
newer version, raise `max_version` and add the fields that version introduces
(see README.md). `min_version`/`max_version` are the ranges we advertise, or will once the
API is served (docs/contracts/wire-protocol.md); which of them a handler accepts is the
server's business.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from .types import (
    BOOL,
    BYTES,
    INT8,
    INT16,
    INT32,
    INT64,
    RECORDS,
    STRING,
    Array,
    Struct,
)
from .types import Field as F


class ApiKey(enum.IntEnum):
    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    LEADER_AND_ISR = 4
    STOP_REPLICA = 5
    UPDATE_METADATA = 6
    CONTROLLED_SHUTDOWN = 7
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    SASL_HANDSHAKE = 17
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    INIT_PRODUCER_ID = 22
    OFFSET_FOR_LEADER_EPOCH = 23
    DESCRIBE_CONFIGS = 32
    ALTER_CONFIGS = 33
    SASL_AUTHENTICATE = 36
    CREATE_PARTITIONS = 37
    DELETE_GROUPS = 42
    ELECT_LEADERS = 43
    INCREMENTAL_ALTER_CONFIGS = 44
    OFFSET_DELETE = 47
    DESCRIBE_CLUSTER = 60
    DESCRIBE_LOG_DIRS = 35
    ALTER_PARTITION_REASSIGNMENTS = 45
    LIST_PARTITION_REASSIGNMENTS = 46
    DESCRIBE_USER_SCRAM_CREDENTIALS = 50
    ALTER_USER_SCRAM_CREDENTIALS = 51
    DESCRIBE_ACLS = 29
    CREATE_ACLS = 30
    DELETE_ACLS = 31


PRODUCE = ApiKey.PRODUCE
FETCH = ApiKey.FETCH
LIST_OFFSETS = ApiKey.LIST_OFFSETS
METADATA = ApiKey.METADATA
LEADER_AND_ISR = ApiKey.LEADER_AND_ISR
STOP_REPLICA = ApiKey.STOP_REPLICA
UPDATE_METADATA = ApiKey.UPDATE_METADATA
CONTROLLED_SHUTDOWN = ApiKey.CONTROLLED_SHUTDOWN
OFFSET_COMMIT = ApiKey.OFFSET_COMMIT
OFFSET_FETCH = ApiKey.OFFSET_FETCH
FIND_COORDINATOR = ApiKey.FIND_COORDINATOR
JOIN_GROUP = ApiKey.JOIN_GROUP
HEARTBEAT = ApiKey.HEARTBEAT
LEAVE_GROUP = ApiKey.LEAVE_GROUP
SYNC_GROUP = ApiKey.SYNC_GROUP
DESCRIBE_GROUPS = ApiKey.DESCRIBE_GROUPS
LIST_GROUPS = ApiKey.LIST_GROUPS
SASL_HANDSHAKE = ApiKey.SASL_HANDSHAKE
API_VERSIONS = ApiKey.API_VERSIONS
CREATE_TOPICS = ApiKey.CREATE_TOPICS
DELETE_TOPICS = ApiKey.DELETE_TOPICS
INIT_PRODUCER_ID = ApiKey.INIT_PRODUCER_ID
OFFSET_FOR_LEADER_EPOCH = ApiKey.OFFSET_FOR_LEADER_EPOCH
DESCRIBE_CONFIGS = ApiKey.DESCRIBE_CONFIGS
ALTER_CONFIGS = ApiKey.ALTER_CONFIGS
SASL_AUTHENTICATE = ApiKey.SASL_AUTHENTICATE
CREATE_PARTITIONS = ApiKey.CREATE_PARTITIONS
DELETE_GROUPS = ApiKey.DELETE_GROUPS
ELECT_LEADERS = ApiKey.ELECT_LEADERS
INCREMENTAL_ALTER_CONFIGS = ApiKey.INCREMENTAL_ALTER_CONFIGS
OFFSET_DELETE = ApiKey.OFFSET_DELETE
DESCRIBE_CLUSTER = ApiKey.DESCRIBE_CLUSTER
DESCRIBE_LOG_DIRS = ApiKey.DESCRIBE_LOG_DIRS
ALTER_PARTITION_REASSIGNMENTS = ApiKey.ALTER_PARTITION_REASSIGNMENTS
LIST_PARTITION_REASSIGNMENTS = ApiKey.LIST_PARTITION_REASSIGNMENTS
DESCRIBE_USER_SCRAM_CREDENTIALS = ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS
ALTER_USER_SCRAM_CREDENTIALS = ApiKey.ALTER_USER_SCRAM_CREDENTIALS
DESCRIBE_ACLS = ApiKey.DESCRIBE_ACLS
CREATE_ACLS = ApiKey.CREATE_ACLS
DELETE_ACLS = ApiKey.DELETE_ACLS


@dataclass(frozen=True, eq=False)
class Api:
    key: int
    name: str
    min_version: int
    max_version: int
    flexible_from: int | None  # first flexible version in Kafka (may lie above max_version)
    request: Struct
    response: Struct

    def is_flexible(self, version: int) -> bool:
        return self.flexible_from is not None and version >= self.flexible_from

    def supports(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version


# throttle_time_ms from v1 on, which most responses start with.
THROTTLE_1 = F("throttle_time_ms", INT32, "1+")

# The declarations are laid out like the JSON they come from; keep the formatter off them.
# fmt: off

PRODUCE_API = Api(
    PRODUCE, "Produce", 0, 8, 9,
    request=Struct(
        F("transactional_id", STRING, "3+", nullable="3+", default=None),
        F("acks", INT16),
        F("timeout_ms", INT32),
        F("topic_data", Array(Struct(
            F("name", STRING),
            F("partition_data", Array(Struct(
                F("index", INT32),
                F("records", RECORDS, nullable="0+"),
            ))),
        ))),
    ),
    response=Struct(
        F("responses", Array(Struct(
            F("name", STRING),
            F("partition_responses", Array(Struct(
                F("index", INT32),
                F("error_code", INT16),
                F("base_offset", INT64),
                F("log_append_time_ms", INT64, "2+", default=-1),
                F("log_start_offset", INT64, "5+", default=-1),
                F("record_errors", Array(Struct(
                    F("batch_index", INT32, "8+"),
                    F("batch_index_error_message", STRING, "8+", nullable="8+", default=None),
                )), "8+"),
                F("error_message", STRING, "8+", nullable="8+", default=None),
            ))),
        ))),
        THROTTLE_1,
    ),
)

FETCH_API = Api(
    FETCH, "Fetch", 4, 11, 12,
    request=Struct(
        F("replica_id", INT32, "0-14", default=-1),
        F("max_wait_ms", INT32),
        F("min_bytes", INT32),
        F("max_bytes", INT32, "3+", default=0x7FFFFFFF),
        F("isolation_level", INT8, "4+", default=0),
        F("session_id", INT32, "7+", default=0),
        F("session_epoch", INT32, "7+", default=-1),
        F("topics", Array(Struct(
            F("topic", STRING, "0-12"),
            F("partitions", Array(Struct(
                F("partition", INT32),
                F("current_leader_epoch", INT32, "9+", default=-1),
                F("fetch_offset", INT64),
                F("log_start_offset", INT64, "5+", default=-1),
                F("partition_max_bytes", INT32),
            ))),
        ))),
        F("forgotten_topics_data", Array(Struct(
            F("topic", STRING, "7-12"),
            F("partitions", Array(INT32), "7+"),
        )), "7+"),
        F("rack_id", STRING, "11+", default=""),
    ),
    response=Struct(
        THROTTLE_1,
        F("error_code", INT16, "7+"),
        F("session_id", INT32, "7+", default=0),
        F("responses", Array(Struct(
            F("topic", STRING, "0-12"),
            F("partitions", Array(Struct(
                F("partition_index", INT32),
                F("error_code", INT16),
                F("high_watermark", INT64),
                F("last_stable_offset", INT64, "4+", default=-1),
                F("log_start_offset", INT64, "5+", default=-1),
                F("aborted_transactions", Array(Struct(
                    F("producer_id", INT64, "4+"),
                    F("first_offset", INT64, "4+"),
                )), "4+", nullable="4+"),
                F("preferred_read_replica", INT32, "11+", default=-1),
                F("records", RECORDS, nullable="0+"),
            ))),
        ))),
    ),
)

LIST_OFFSETS_API = Api(
    LIST_OFFSETS, "ListOffsets", 1, 7, 6,
    request=Struct(
        F("replica_id", INT32),
        F("isolation_level", INT8, "2+"),
        F("topics", Array(Struct(
            F("name", STRING),
            F("partitions", Array(Struct(
                F("partition_index", INT32),
                F("current_leader_epoch", INT32, "4+", default=-1),
                F("timestamp", INT64),
            ))),
        ))),
    ),
    response=Struct(
        F("throttle_time_ms", INT32, "2+"),
        F("topics", Array(Struct(
            F("name", STRING),
            F("partitions", Array(Struct(
                F("partition_index", INT32),
                F("error_code", INT16),
                F("timestamp", INT64, "1+", default=-1),
                F("offset", INT64, "1+", default=-1),
                F("leader_epoch", INT32, "4+", default=-1),
            ))),
        ))),
    ),
)

METADATA_API = Api(
    METADATA, "Metadata", 0, 9, 9,
    request=Struct(
        # v0 has no null: an empty list there means "all topics", as null does from v1.
        F("topics", Array(Struct(F("name", STRING))), nullable="1+"),
        F("allow_auto_topic_creation", BOOL, "4+", default=True),
        F("include_cluster_authorized_operations", BOOL, "8-10"),
        F("include_topic_authorized_operations", BOOL, "8+"),
    ),
    response=Struct(
        F("throttle_time_ms", INT32, "3+"),
        F("brokers", Array(Struct(
            F("node_id", INT32),
            F("host", STRING),
            F("port", INT32),
            F("rack", STRING, "1+", nullable="1+", default=None),
        ))),
        F("cluster_id", STRING, "2+", nullable="2+", default=None),
        F("controller_id", INT32, "1+", default=-1),
        F("topics", Array(Struct(
            F("error_code", INT16),
            F("name", STRING),
            F("is_internal", BOOL, "1+", default=False),
            F("partitions", Array(Struct(
                F("error_code", INT16),
                F("partition_index", INT32),
                F("leader_id", INT32),
                F("leader_epoch", INT32, "7+", default=-1),
                F("replica_nodes", Array(INT32)),
                F("isr_nodes", Array(INT32)),
                F("offline_replicas", Array(INT32), "5+"),
            ))),
            F("topic_authorized_operations", INT32, "8+", default=-(2**31)),
        ))),
        F("cluster_authorized_operations", INT32, "8-10", default=-(2**31)),
    ),
)

OFFSET_COMMIT_API = Api(
    OFFSET_COMMIT, "OffsetCommit", 2, 8, 8,
    request=Struct(
        F("group_id", STRING),
        F("generation_id_or_member_epoch", INT32, "1+", default=-1),
        F("member_id", STRING, "1+"),
        F("group_instance_id", STRING, "7+", nullable="7+", default=None),
        F("retention_time_ms", INT64, "2-4", default=-1),
        F("topics", Array(Struct(
            F("name", STRING),
            F("partitions", Array(Struct(
                F("partition_index", INT32),
                F("committed_offset", INT64),
                F("committed_leader_epoch", INT32, "6+", default=-1),
                F("committed_metadata", STRING, nullable="0+"),
            ))),
        ))),
    ),
    response=Struct(
        F("throttle_time_ms", INT32, "3+"),
        F("topics", Array(Struct(
            F("name", STRING),
            F("partitions", Array(Struct(
                F("partition_index", INT32),
                F("error_code", INT16),
            ))),
        ))),
    ),
)

OFFSET_FETCH_API = Api(
    OFFSET_FETCH, "OffsetFetch", 1, 7, 6,
    request=Struct(
        F("group_id", STRING, "0-7"),
        # null (v2+) asks for every partition the group has committed.
        F("topics", Array(Struct(
            F("name", STRING, "0-7"),
            F("partition_indexes", Array(INT32), "0-7"),
        )), "0-7", nullable="2-7"),
        F("require_stable", BOOL, "7+", default=False),
    ),
    response=Struct(
        F("throttle_time_ms", INT32, "3+"),
        F("topics", Array(Struct(
            F("name", STRING, "0-7"),
            F("partitions", Array(Struct(
                F("partition_index", INT32, "0-7"),
                F("committed_offset", INT64, "0-7"),
                F("committed_leader_epoch", INT32, "5-7", default=-1),
                F("metadata", STRING, "0-7", nullable="0-7"),
                F("error_code", INT16, "0-7"),
            )), "0-7"),
        )), "0-7"),
        F("error_code", INT16, "2-7", default=0),
    ),
)

FIND_COORDINATOR_API = Api(
    FIND_COORDINATOR, "FindCoordinator", 0, 4, 3,
    request=Struct(
        F("key", STRING, "0-3"),
        F("key_type", INT8, "1+", default=0),
        # v4+ (KIP-699): several keys of one type in one request.
        F("coordinator_keys", Array(STRING), "4+"),
    ),
    response=Struct(
        THROTTLE_1,
        F("error_code", INT16, "0-3"),
        F("error_message", STRING, "1-3", nullable="1-3", default=None),
        F("node_id", INT32, "0-3"),
        F("host", STRING, "0-3"),
        F("port", INT32, "0-3"),
        F("coordinators", Array(Struct(
            F("key", STRING),
            F("node_id", INT32),
            F("host", STRING),
            F("port", INT32),
            F("error_code", INT16),
            F("error_message", STRING, nullable="4+", default=None),
        )), "4+"),
    ),
)

JOIN_GROUP_API = Api(
    JOIN_GROUP, "JoinGroup", 0, 7, 6,
    request=Struct(
        F("group_id", STRING),
        F("session_timeout_ms", INT32),
        # v0 has none: the session timeout is the rebalance timeout.
        F("rebalance_timeout_ms", INT32, "1+", default=-1),
        F("member_id", STRING),
        F("group_instance_id", STRING, "5+", nullable="5+", default=None),
        F("protocol_type", STRING),
        F("protocols", Array(Struct(
            F("name", STRING),
            F("metadata", BYTES),
        ))),
    ),
    response=Struct(
        F("throttle_time_ms", INT32, "2+"),
        F("error_code", INT16),
        F("generation_id", INT32, default=-1),
        F("protocol_type", STRING, "7+", nullable="7+", default=None),
        F("protocol_name", STRING, nullable="7+"),
        F("leader", STRING),
        F("member_id", STRING),
        F("members", Array(Struct(
            F("member_id", STRING),
            F("group_instance_id", STRING, "5+", nullable="5+", default=None),
            F("metadata", BYTES),
        ))),
    ),
)

HEARTBEAT_API = Api(
    HEARTBEAT, "Heartbeat", 0, 4, 4,
    request=Struct(
        F("group_id", STRING),
        F("generation_id", INT32),
        F("member_id", STRING),
        F("group_instance_id", STRING, "3+", nullable="3+", default=None),
    ),
    response=Struct(
        THROTTLE_1,
        F("error_code", INT16),
    ),
)

LEAVE_GROUP_API = Api(
    LEAVE_GROUP, "LeaveGroup", 0, 5, 4,
    request=Struct(
        F("group_id", STRING),
        F("member_id", STRING, "0-2"),
        # v3+ (KIP-345): a batch of members, static ones named by their instance id.
        F("members", Array(Struct(
            F("member_id", STRING),
            F("group_instance_id", STRING, nullable="3+", default=None),
            F("reason", STRING, "5+", nullable="5+", default=None),
        )), "3+"),
    ),
    response=Struct(
        THROTTLE_1,
        F("error_code", INT16),
        F("members", Array(Struct(
            F("member_id", STRING),
            F("group_instance_id", STRING, nullable="3+", default=None),
            F("error_code", INT16),
        )), "3+"),
    ),
)

SYNC_GROUP_API = Api(
    SYNC_GROUP, "SyncGroup", 0, 5, 4,
    request=Struct(
        F("group_id", STRING),
        F("generation_id", INT32),
        F("member_id", STRING),
        F("group_instance_id", STRING, "3+", nullable="3+", default=None),
        F("protocol_type", STRING, "5+", nullable="5+", default=None),
        F("protocol_name", STRING, "5+", nullable="5+", default=None),
        F("assignments", Array(Struct(
            F("member_id", STRING),
            F("assignment", BYTES),
        ))),
    ),
    response=Struct(
        THROTTLE_1,
        F("error_code", INT16),
        F("protocol_type", STRING, "5+", nullable="5+", default=None),
        F("protocol_name", STRING, "5+", nullable="5+", default=None),
        F("assignment", BYTES),
    ),
)

DESCRIBE_GROUPS_API = Api(
    DESCRIBE_GROUPS, "DescribeGroups", 0, 5, 5,
    request=Struct(
        F("groups", Array(STRING)),
        F("include_authorized_operations", BOOL, "3+", default=False),
    ),
    response=Struct(
        THROTTLE_1,
        F("groups", Array(Struct(
            F("error_code", INT16),
            F("group_id", STRING),
            F("group_state", STRING),
            F("protocol_type", STRING),
            F("protocol_data", STRING),
            F("members", Array(Struct(
                F("member_id", STRING),
                F("group_instance_id", STRING, "4+", nullable="4+", default=None),
                F("client_id", STRING),
                F("client_host", STRING),
                F("member_metadata", BYTES),
                F("member_assignment", BYTES),
            ))),
            # Kafka's "not asked" value; ACLs are another issue's.
            F("authorized_operations", INT32, "3+", default=-(2**31)),
        ))),
    ),
)

LIST_GROUPS_API = Api(
    LIST_GROUPS, "ListGroups", 0, 4, 3,
    request=Struct(
        F("states_filter", Array(STRING), "4+"),
    ),
    response=Struct(
        THROTTLE_1,
        F("error_code", INT16),
        F("groups", Array(Struct(
            F("group_id", STRING),
            F("protocol_type", STRING),
            F("group_state", STRING, "4+"),
        ))),
    ),
)

DELETE_GROUPS_API = Api(
    DELETE_GROUPS, "DeleteGroups", 0, 2, 2,
    request=Struct(
        F("groups_names", Array(STRING)),
    ),
    response=Struct(
        F("throttle_time_ms", INT32),
        F("results", Array(Struct(
            F("group_id", STRING),
            F("error_code", INT16),
        ))),
    ),
)

OFFSET_DELETE_API = Api(
    OFFSET_DELETE, "OffsetDelete", 0, 0, None,
    request=Struct(
        F("group_id", STRING),
        F("topics", Array(Struct(
            F("name", STRING),
            F("partitions", Array(Struct(
                F("partition_index", INT32),
            ))),
        ))),
    ),
    response=Struct(
        F("error_code", INT16),
        F("throttle_time_ms", INT32),
        F("topics", Array(Struct(
            F("name", STRING),
            F("partitions", Array(Struct(
                F("partition_index", INT32),
                F("error_code", INT16),
            ))),
        ))),
    ),
)

# SaslHandshake stays at v1: Kafka's own note, clients up to 2.4 cannot negotiate higher.
SASL_HANDSHAKE_API = Api(
    SASL_HANDSHAKE, "SaslHandshake", 0, 1, None,
    request=Struct(
        F("mechanism", STRING),
    ),
    response=Struct(
        F("error_code", INT16),
        F("mechanisms", Array(STRING)),
    ),
)

SASL_AUTHENTICATE_API = Api(
    SASL_AUTHENTICATE, "SaslAuthenticate", 0, 2, 2,
    request=Struct(
        F("auth_bytes", BYTES),
    ),
    response=Struct(
        F("error_code", INT16),
        F("error_message", STRING, nullable="0+", default=None),
        F("auth_bytes", BYTES),
        F("session_lifetime_ms", INT64, "1+", default=0),
    ),
)

API_VERSIONS_API = Api(
    API_VERSIONS, "ApiVersions", 0, 3, 3,
    request=Struct(
        F("client_software_name", STRING, "3+"),
        F("client_software_version", STRING, "3+"),
    ),
    response=Struct(
        F("error_code", INT16),
        F("api_keys", Array(Struct(
            F("api_key", INT16),
            F("min_version", INT16),
            F("max_version", INT16),
        ))),
        THROTTLE_1,
        F("supported_features", Array(Struct(
            F("name", STRING, "3+"),
            F("min_version", INT16, "3+"),
            F("max_version", INT16, "3+"),
        )), "3+", tag=0),
        F("finalized_features_epoch", INT64, "3+", default=-1, tag=1),
        F("finalized_features", Array(Struct(
            F("name", STRING, "3+"),
            F("max_version_level", INT16, "3+"),
            F("min_version_level", INT16, "3+"),
        )), "3+", tag=2),
        F("zk_migration_ready", BOOL, "3+", default=False, tag=3),
    ),
)

CREATE_TOPICS_API = Api(
    CREATE_TOPICS, "CreateTopics", 2, 4, 5,
    request=Struct(
        F("topics", Array(Struct(
            F("name", STRING),
            F("num_partitions", INT32),
            F("replication_factor", INT16),
            F("assignments", Array(Struct(
                F("partition_index", INT32),
                F("broker_ids", Array(INT32)),
            ))),
            F("configs", Array(Struct(
                F("name", STRING),
                F("value", STRING, nullable="0+"),
            ))),
        ))),
        F("timeout_ms", INT32, default=60000),
        F("validate_only", BOOL, "1+", default=False),
    ),
    response=Struct(
        F("throttle_time_ms", INT32, "2+"),
        F("topics", Array(Struct(
            F("name", STRING),
            F("error_code", INT16),
            F("error_message", STRING, "1+", nullable="0+", default=None),
        ))),
    ),
)

DELETE_TOPICS_API = Api(
    DELETE_TOPICS, "DeleteTopics", 1, 3, 4,
    request=Struct(
        F("topic_names", Array(STRING), "0-5"),
        F("timeout_ms", INT32),
    ),
    response=Struct(
        THROTTLE_1,
        F("responses", Array(Struct(
            F("name", STRING),
            F("error_code", INT16),
        ))),
    ),
)

INIT_PRODUCER_ID_API = Api(
    INIT_PRODUCER_ID, "InitProducerId", 0, 1, 2,
    request=Struct(
        F("transactional_id", STRING, nullable="0+"),
        F("transaction_timeout_ms", INT32),
    ),
    response=Struct(
        F("throttle_time_ms", INT32),
        F("error_code", INT16),
        F("producer_id", INT64, default=-1),
        F("producer_epoch", INT16),
    ),
)

# -- Inter-broker APIs. Every broker of a cluster runs this code, so each is declared at
# one version: the last one before the flexible versions, with everything the ZooKeeper
# era needs (broker epochs, adding/removing replicas for reassignments, offline replicas,
# listener names). Clients also send OffsetForLeaderEpoch (KIP-320): librdkafka v2 only,
# kafka-python up to v4 -> min(4, ours) = 3.

PARTITION_ERRORS = F("partition_errors", Array(Struct(
    F("topic_name", STRING),
    F("partition_index", INT32),
    F("error_code", INT16),
)))

LEADER_AND_ISR_API = Api(
    LEADER_AND_ISR, "LeaderAndIsr", 3, 3, 4,
    request=Struct(
        F("controller_id", INT32),
        F("controller_epoch", INT32),
        F("broker_epoch", INT64, default=-1),
        F("topic_states", Array(Struct(
            F("topic_name", STRING),
            F("partition_states", Array(Struct(
                F("partition_index", INT32),
                F("controller_epoch", INT32),
                F("leader", INT32),
                F("leader_epoch", INT32),
                F("isr", Array(INT32)),
                F("zk_version", INT32),
                F("replicas", Array(INT32)),
                F("adding_replicas", Array(INT32)),
                F("removing_replicas", Array(INT32)),
                F("is_new", BOOL, default=False),
            ))),
        ))),
        F("live_leaders", Array(Struct(
            F("broker_id", INT32),
            F("host_name", STRING),
            F("port", INT32),
        ))),
    ),
    response=Struct(
        F("error_code", INT16),
        PARTITION_ERRORS,
    ),
)

STOP_REPLICA_API = Api(
    STOP_REPLICA, "StopReplica", 1, 1, 2,
    request=Struct(
        F("controller_id", INT32),
        F("controller_epoch", INT32),
        F("broker_epoch", INT64, default=-1),
        F("delete_partitions", BOOL),
        F("topics", Array(Struct(
            F("name", STRING),
            F("partition_indexes", Array(INT32)),
        ))),
    ),
    response=Struct(
        F("error_code", INT16),
        PARTITION_ERRORS,
    ),
)

UPDATE_METADATA_API = Api(
    UPDATE_METADATA, "UpdateMetadata", 5, 5, 6,
    request=Struct(
        F("controller_id", INT32),
        F("controller_epoch", INT32),
        F("broker_epoch", INT64, default=-1),
        F("topic_states", Array(Struct(
            F("topic_name", STRING),
            F("partition_states", Array(Struct(
                F("partition_index", INT32),
                F("controller_epoch", INT32),
                F("leader", INT32),
                F("leader_epoch", INT32),
                F("isr", Array(INT32)),
                F("zk_version", INT32),
                F("replicas", Array(INT32)),
                F("offline_replicas", Array(INT32)),
            ))),
        ))),
        F("live_brokers", Array(Struct(
            F("id", INT32),
            F("endpoints", Array(Struct(
                F("port", INT32),
                F("host", STRING),
                F("listener", STRING),
                F("security_protocol", INT16),
            ))),
            F("rack", STRING, nullable="0+", default=None),
        ))),
    ),
    response=Struct(
        F("error_code", INT16),
    ),
)

CONTROLLED_SHUTDOWN_API = Api(
    CONTROLLED_SHUTDOWN, "ControlledShutdown", 2, 2, 3,
    request=Struct(
        F("broker_id", INT32),
        F("broker_epoch", INT64, default=-1),
    ),
    response=Struct(
        F("error_code", INT16),
        F("remaining_partitions", Array(Struct(
            F("topic_name", STRING),
            F("partition_index", INT32),
        ))),
    ),
)

OFFSET_FOR_LEADER_EPOCH_API = Api(
    OFFSET_FOR_LEADER_EPOCH, "OffsetForLeaderEpoch", 0, 3, 4,
    request=Struct(
        # -1 from a consumer, a broker id from a follower; v0-v2 carry none (-2 as Kafka).
        F("replica_id", INT32, "3+", default=-2),
        F("topics", Array(Struct(
            F("topic", STRING),
            F("partitions", Array(Struct(
                F("partition", INT32),
                F("current_leader_epoch", INT32, "2+", default=-1),
                F("leader_epoch", INT32),
            ))),
        ))),
    ),
    response=Struct(
        F("throttle_time_ms", INT32, "2+"),
        F("topics", Array(Struct(
            F("topic", STRING),
            F("partitions", Array(Struct(
                F("error_code", INT16),
                F("partition", INT32),
                F("leader_epoch", INT32, "1+", default=-1),
                F("end_offset", INT64),
            ))),
        ))),
    ),
)

CREATE_PARTITIONS_API = Api(
    CREATE_PARTITIONS, "CreatePartitions", 0, 3, 2,
    request=Struct(
        F("topics", Array(Struct(
            F("name", STRING),
            F("count", INT32),
            # null: the broker places the new partitions' replicas.
            F("assignments", Array(Struct(
                F("broker_ids", Array(INT32)),
            )), nullable="0+"),
        ))),
        F("timeout_ms", INT32),
        F("validate_only", BOOL),
    ),
    response=Struct(
        F("throttle_time_ms", INT32),
        F("results", Array(Struct(
            F("name", STRING),
            F("error_code", INT16),
            F("error_message", STRING, nullable="0+", default=None),
        ))),
    ),
)

ELECT_LEADERS_API = Api(
    ELECT_LEADERS, "ElectLeaders", 0, 2, 2,
    request=Struct(
        # 0 preferred, 1 unclean (v1+; v0 is always preferred).
        F("election_type", INT8, "1+", default=0),
        # null: every partition.
        F("topic_partitions", Array(Struct(
            F("topic", STRING),
            F("partitions", Array(INT32)),
        )), nullable="0+"),
        F("timeout_ms", INT32, default=60000),
    ),
    response=Struct(
        F("throttle_time_ms", INT32),
        F("error_code", INT16, "1+"),
        F("replica_election_results", Array(Struct(
            F("topic", STRING),
            F("partition_result", Array(Struct(
                F("partition_id", INT32),
                F("error_code", INT16),
                F("error_message", STRING, nullable="0+", default=None),
            ))),
        ))),
    ),
)

DESCRIBE_CLUSTER_API = Api(
    DESCRIBE_CLUSTER, "DescribeCluster", 0, 2, 0,
    request=Struct(
        F("include_cluster_authorized_operations", BOOL),
        # 1: brokers (2, controllers, is KRaft's: no such endpoints here).
        F("endpoint_type", INT8, "1+", default=1),
        F("include_fenced_brokers", BOOL, "2+", default=False),
    ),
    response=Struct(
        F("throttle_time_ms", INT32),
        F("error_code", INT16),
        F("error_message", STRING, nullable="0+", default=None),
        F("endpoint_type", INT8, "1+", default=1),
        F("cluster_id", STRING),
        F("controller_id", INT32, default=-1),
        F("brokers", Array(Struct(
            F("broker_id", INT32),
            F("host", STRING),
            F("port", INT32),
            F("rack", STRING, nullable="0+", default=None),
            F("is_fenced", BOOL, "2+", default=False),
        ))),
        F("cluster_authorized_operations", INT32, default=-(2**31)),
    ),
)

# -- configs (resource types: 2 topic, 4 broker, 8 broker logger) --

DESCRIBE_CONFIGS_API = Api(
    DESCRIBE_CONFIGS, "DescribeConfigs", 0, 4, 4,
    request=Struct(
        F("resources", Array(Struct(
            F("resource_type", INT8),
            F("resource_name", STRING),
            # null: every key.
            F("configuration_keys", Array(STRING), nullable="0+", default=None),
        ))),
        # Kafka's JSON spells it IncludeSynoyms (sic); the bytes are what count.
        F("include_synonyms", BOOL, "1+", default=False),
        F("include_documentation", BOOL, "3+", default=False),
    ),
    response=Struct(
        F("throttle_time_ms", INT32),
        F("results", Array(Struct(
            F("error_code", INT16),
            F("error_message", STRING, nullable="0+", default=None),
            F("resource_type", INT8),
            F("resource_name", STRING),
            F("configs", Array(Struct(
                F("name", STRING),
                F("value", STRING, nullable="0+", default=None),
                F("read_only", BOOL),
                F("is_default", BOOL, "0"),
                # 1 topic, 2 dynamic broker, 3 dynamic cluster default, 4 static broker,
                # 5 default.
                F("config_source", INT8, "1+", default=-1),
                F("is_sensitive", BOOL),
                F("synonyms", Array(Struct(
                    F("name", STRING),
                    F("value", STRING, nullable="0+", default=None),
                    F("source", INT8),
                )), "1+"),
                # 1 boolean, 2 string, 3 int, 4 short, 5 long, 6 double, 7 list, 8 class,
                # 9 password.
                F("config_type", INT8, "3+", default=0),
                F("documentation", STRING, "3+", nullable="0+", default=None),
            ))),
        ))),
    ),
)

_ALTER_CONFIGS_RESPONSE = Struct(
    F("throttle_time_ms", INT32),
    F("responses", Array(Struct(
        F("error_code", INT16),
        F("error_message", STRING, nullable="0+", default=None),
        F("resource_type", INT8),
        F("resource_name", STRING),
    ))),
)

ALTER_CONFIGS_API = Api(
    ALTER_CONFIGS, "AlterConfigs", 0, 2, 2,
    request=Struct(
        F("resources", Array(Struct(
            F("resource_type", INT8),
            F("resource_name", STRING),
            F("configs", Array(Struct(
                F("name", STRING),
                F("value", STRING, nullable="0+", default=None),
            ))),
        ))),
        F("validate_only", BOOL),
    ),
    response=_ALTER_CONFIGS_RESPONSE,
)

INCREMENTAL_ALTER_CONFIGS_API = Api(
    INCREMENTAL_ALTER_CONFIGS, "IncrementalAlterConfigs", 0, 1, 1,
    request=Struct(
        F("resources", Array(Struct(
            F("resource_type", INT8),
            F("resource_name", STRING),
            F("configs", Array(Struct(
                F("name", STRING),
                # 0 set, 1 delete, 2 append, 3 subtract (the last two for list keys).
                F("config_operation", INT8),
                F("value", STRING, nullable="0+", default=None),
            ))),
        ))),
        F("validate_only", BOOL),
    ),
    response=_ALTER_CONFIGS_RESPONSE,
)

DESCRIBE_LOG_DIRS_API = Api(
    DESCRIBE_LOG_DIRS, "DescribeLogDirs", 0, 4, 2,
    request=Struct(
        # null: every partition of every log dir.
        F("topics", Array(Struct(
            F("topic", STRING),
            F("partitions", Array(INT32)),
        )), nullable="0+"),
    ),
    response=Struct(
        F("throttle_time_ms", INT32),
        F("error_code", INT16, "3+"),
        F("results", Array(Struct(
            F("error_code", INT16),
            F("log_dir", STRING),
            F("topics", Array(Struct(
                F("name", STRING),
                F("partitions", Array(Struct(
                    F("partition_index", INT32),
                    F("partition_size", INT64),
                    F("offset_lag", INT64),
                    F("is_future_key", BOOL),
                ))),
            ))),
            F("total_bytes", INT64, "4+", default=-1),
            F("usable_bytes", INT64, "4+", default=-1),
        ))),
    ),
)

ALTER_PARTITION_REASSIGNMENTS_API = Api(
    ALTER_PARTITION_REASSIGNMENTS, "AlterPartitionReassignments", 0, 0, 0,
    request=Struct(
        F("timeout_ms", INT32, default=60000),
        F("topics", Array(Struct(
            F("name", STRING),
            F("partitions", Array(Struct(
                F("partition_index", INT32),
                # null: cancel the reassignment under way.
                F("replicas", Array(INT32), nullable="0+"),
            ))),
        ))),
    ),
    response=Struct(
        F("throttle_time_ms", INT32),
        F("error_code", INT16),
        F("error_message", STRING, nullable="0+", default=None),
        F("responses", Array(Struct(
            F("name", STRING),
            F("partitions", Array(Struct(
                F("partition_index", INT32),
                F("error_code", INT16),
                F("error_message", STRING, nullable="0+", default=None),
            ))),
        ))),
    ),
)

LIST_PARTITION_REASSIGNMENTS_API = Api(
    LIST_PARTITION_REASSIGNMENTS, "ListPartitionReassignments", 0, 0, 0,
    request=Struct(
        F("timeout_ms", INT32, default=60000),
        # null: every reassignment under way.
        F("topics", Array(Struct(
            F("name", STRING),
            F("partition_indexes", Array(INT32)),
        )), nullable="0+"),
    ),
    response=Struct(
        F("throttle_time_ms", INT32),
        F("error_code", INT16),
        F("error_message", STRING, nullable="0+", default=None),
        F("topics", Array(Struct(
            F("name", STRING),
            F("partitions", Array(Struct(
                F("partition_index", INT32),
                F("replicas", Array(INT32)),
                F("adding_replicas", Array(INT32)),
                F("removing_replicas", Array(INT32)),
            ))),
        ))),
    ),
)

# -- ACLs (codes: broker/security/acl.py; v0, without pattern types, is no longer Kafka's) --

_ACL_FILTER = (
    F("resource_type_filter", INT8),
    F("resource_name_filter", STRING, nullable="0+"),
    F("pattern_type_filter", INT8, default=3),
    F("principal_filter", STRING, nullable="0+"),
    F("host_filter", STRING, nullable="0+"),
    F("operation", INT8),
    F("permission_type", INT8),
)

DESCRIBE_ACLS_API = Api(
    DESCRIBE_ACLS, "DescribeAcls", 1, 3, 2,
    request=Struct(*_ACL_FILTER),
    response=Struct(
        F("throttle_time_ms", INT32),
        F("error_code", INT16),
        F("error_message", STRING, nullable="0+", default=None),
        F("resources", Array(Struct(
            F("resource_type", INT8),
            F("resource_name", STRING),
            F("pattern_type", INT8, default=3),
            F("acls", Array(Struct(
                F("principal", STRING),
                F("host", STRING),
                F("operation", INT8),
                F("permission_type", INT8),
            ))),
        ))),
    ),
)

CREATE_ACLS_API = Api(
    CREATE_ACLS, "CreateAcls", 1, 3, 2,
    request=Struct(
        F("creations", Array(Struct(
            F("resource_type", INT8),
            F("resource_name", STRING),
            F("resource_pattern_type", INT8, default=3),
            F("principal", STRING),
            F("host", STRING),
            F("operation", INT8),
            F("permission_type", INT8),
        ))),
    ),
    response=Struct(
        F("throttle_time_ms", INT32),
        F("results", Array(Struct(
            F("error_code", INT16),
            F("error_message", STRING, nullable="0+", default=None),
        ))),
    ),
)

DELETE_ACLS_API = Api(
    DELETE_ACLS, "DeleteAcls", 1, 3, 2,
    request=Struct(F("filters", Array(Struct(*_ACL_FILTER)))),
    response=Struct(
        F("throttle_time_ms", INT32),
        F("filter_results", Array(Struct(
            F("error_code", INT16),
            F("error_message", STRING, nullable="0+", default=None),
            F("matching_acls", Array(Struct(
                F("error_code", INT16),
                F("error_message", STRING, nullable="0+", default=None),
                F("resource_type", INT8),
                F("resource_name", STRING),
                F("pattern_type", INT8, default=3),
                F("principal", STRING),
                F("host", STRING),
                F("operation", INT8),
                F("permission_type", INT8),
            ))),
        ))),
    ),
)

# fmt: on

# -- security (docs/contracts/security.md) --

# Mechanism codes: 1 SCRAM-SHA-256, 2 SCRAM-SHA-512 (broker/security/scram.py).
DESCRIBE_USER_SCRAM_CREDENTIALS_API = Api(
    DESCRIBE_USER_SCRAM_CREDENTIALS,
    "DescribeUserScramCredentials",
    0,
    0,
    0,
    request=Struct(
        # null or empty: every user.
        F(
            "users",
            Array(
                Struct(
                    F("name", STRING),
                )
            ),
            nullable="0+",
            default=None,
        ),
    ),
    response=Struct(
        F("throttle_time_ms", INT32),
        F("error_code", INT16),
        F("error_message", STRING, nullable="0+", default=None),
        F(
            "results",
            Array(
                Struct(
                    F("user", STRING),
                    F("error_code", INT16),
                    F("error_message", STRING, nullable="0+", default=None),
                    F(
                        "credential_infos",
                        Array(
                            Struct(
                                F("mechanism", INT8),
                                F("iterations", INT32),
                            )
                        ),
                    ),
                )
            ),
        ),
    ),
)

ALTER_USER_SCRAM_CREDENTIALS_API = Api(
    ALTER_USER_SCRAM_CREDENTIALS,
    "AlterUserScramCredentials",
    0,
    0,
    0,
    request=Struct(
        F(
            "deletions",
            Array(
                Struct(
                    F("name", STRING),
                    F("mechanism", INT8),
                )
            ),
        ),
        F(
            "upsertions",
            Array(
                Struct(
                    F("name", STRING),
                    F("mechanism", INT8),
                    F("iterations", INT32),
                    F("salt", BYTES),
                    F("salted_password", BYTES),
                )
            ),
        ),
    ),
    response=Struct(
        F("throttle_time_ms", INT32),
        F(
            "results",
            Array(
                Struct(
                    F("user", STRING),
                    F("error_code", INT16),
                    F("error_message", STRING, nullable="0+", default=None),
                )
            ),
        ),
    ),
)

# fmt: on

API_BY_KEY: dict[int, Api] = dict(
    sorted(
        {
            api.key: api
            for api in (
                PRODUCE_API,
                FETCH_API,
                LIST_OFFSETS_API,
                METADATA_API,
                OFFSET_COMMIT_API,
                OFFSET_FETCH_API,
                FIND_COORDINATOR_API,
                JOIN_GROUP_API,
                HEARTBEAT_API,
                LEAVE_GROUP_API,
                SYNC_GROUP_API,
                DESCRIBE_GROUPS_API,
                LIST_GROUPS_API,
                API_VERSIONS_API,
                SASL_HANDSHAKE_API,
                SASL_AUTHENTICATE_API,
                CREATE_TOPICS_API,
                DELETE_TOPICS_API,
                INIT_PRODUCER_ID_API,
                LEADER_AND_ISR_API,
                STOP_REPLICA_API,
                UPDATE_METADATA_API,
                CONTROLLED_SHUTDOWN_API,
                OFFSET_FOR_LEADER_EPOCH_API,
                DELETE_GROUPS_API,
                OFFSET_DELETE_API,
                DESCRIBE_CONFIGS_API,
                ALTER_CONFIGS_API,
                CREATE_PARTITIONS_API,
                ELECT_LEADERS_API,
                INCREMENTAL_ALTER_CONFIGS_API,
                DESCRIBE_CLUSTER_API,
                DESCRIBE_LOG_DIRS_API,
                ALTER_PARTITION_REASSIGNMENTS_API,
                LIST_PARTITION_REASSIGNMENTS_API,
                DESCRIBE_USER_SCRAM_CREDENTIALS_API,
                ALTER_USER_SCRAM_CREDENTIALS_API,
                DESCRIBE_ACLS_API,
                CREATE_ACLS_API,
                DELETE_ACLS_API,
            )
        }.items()
    )
)
