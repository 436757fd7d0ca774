"""Request and response declarations of every API the broker speaks.

Each API is declared once, as data: one `<NAME>_API = Api(key, name, ...)` with Kafka's
API key and name, field names in snake_case and Kafka's version ranges (facts from
apache/kafka's `clients/src/main/resources/common/message/<Name>{Request,Response}.json`).
Everything else about the set of APIs is derived from those declarations at the end of
this module: `API_BY_KEY`, `ApiKey` and the key constants (`PRODUCE`, `FETCH`, ...).
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

    @property
    def constant(self) -> str:
        """The name in upper snake case, as `ApiKey` spells it: LeaderAndIsr -> LEADER_AND_ISR."""
        return "".join(f"_{c}" if c.isupper() and i else c for i, c in enumerate(self.name)).upper()


# throttle_time_ms from v1 on, which most responses start with.
THROTTLE_1 = F("throttle_time_ms", INT32, "1+")

# The declarations are laid out like the JSON they come from; keep the formatter off them.
# fmt: off

# v9 is flexible, v10 (KIP-951) adds tagged leader hints we do not send, v11 may answer
# TRANSACTION_ABORTABLE (KIP-890), v12 (transaction version 2): a transactional batch
# adds its partition to the transaction (docs/contracts/transactions.md).
PRODUCE_API = Api(
    0, "Produce", 0, 12, 9,
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
    1, "Fetch", 4, 11, 12,
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
    2, "ListOffsets", 1, 7, 6,
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
    3, "Metadata", 0, 9, 9,
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
    8, "OffsetCommit", 2, 8, 8,
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
    9, "OffsetFetch", 1, 7, 6,
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
    10, "FindCoordinator", 0, 4, 3,
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
    11, "JoinGroup", 0, 7, 6,
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
    12, "Heartbeat", 0, 4, 4,
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
    13, "LeaveGroup", 0, 5, 4,
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
    14, "SyncGroup", 0, 5, 4,
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
    15, "DescribeGroups", 0, 5, 5,
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
    16, "ListGroups", 0, 4, 3,
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
    42, "DeleteGroups", 0, 2, 2,
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
    47, "OffsetDelete", 0, 0, None,
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
    17, "SaslHandshake", 0, 1, None,
    request=Struct(
        F("mechanism", STRING),
    ),
    response=Struct(
        F("error_code", INT16),
        F("mechanisms", Array(STRING)),
    ),
)

SASL_AUTHENTICATE_API = Api(
    36, "SaslAuthenticate", 0, 2, 2,
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
    18, "ApiVersions", 0, 3, 3,
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
    19, "CreateTopics", 2, 4, 5,
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
    20, "DeleteTopics", 1, 3, 4,
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

# v5 may answer TRANSACTION_ABORTABLE (KIP-890); we never do, so it is v4.
INIT_PRODUCER_ID_API = Api(
    22, "InitProducerId", 0, 5, 2,
    request=Struct(
        F("transactional_id", STRING, nullable="0+"),
        F("transaction_timeout_ms", INT32),
        F("producer_id", INT64, "3+", default=-1),
        F("producer_epoch", INT16, "3+", default=-1),
    ),
    response=Struct(
        F("throttle_time_ms", INT32),
        F("error_code", INT16),
        F("producer_id", INT64, default=-1),
        F("producer_epoch", INT16),
    ),
)

# -- Transactions (KIP-98; docs/contracts/transactions.md). AddPartitionsToTxn v4+ is the
# brokers' batched form (KIP-890): clients use v0-v3 and its V3AndBelow fields.

TXN_TOPIC_RESULTS = Array(Struct(
    F("name", STRING),
    F("results_by_partition", Array(Struct(
        F("partition_index", INT32),
        F("partition_error_code", INT16),
    ))),
))

# v5: may answer TRANSACTION_ABORTABLE; a broker's non-verify_only v5 request is a
# transaction version 2 Produce adding its partition (KIP-890 part 2).
ADD_PARTITIONS_TO_TXN_API = Api(
    24, "AddPartitionsToTxn", 0, 5, 3,
    request=Struct(
        F("transactions", Array(Struct(
            F("transactional_id", STRING),
            F("producer_id", INT64),
            F("producer_epoch", INT16),
            F("verify_only", BOOL, default=False),
            F("topics", Array(Struct(
                F("name", STRING),
                F("partitions", Array(INT32)),
            ))),
        )), "4+"),
        F("v3_and_below_transactional_id", STRING, "0-3"),
        F("v3_and_below_producer_id", INT64, "0-3"),
        F("v3_and_below_producer_epoch", INT16, "0-3"),
        F("v3_and_below_topics", Array(Struct(
            F("name", STRING),
            F("partitions", Array(INT32)),
        )), "0-3"),
    ),
    response=Struct(
        F("throttle_time_ms", INT32),
        F("error_code", INT16, "4+", default=0),
        F("results_by_transaction", Array(Struct(
            F("transactional_id", STRING),
            F("topic_results", TXN_TOPIC_RESULTS),
        )), "4+"),
        F("results_by_topic_v3_and_below", TXN_TOPIC_RESULTS, "0-3"),
    ),
)

# v4 may answer TRANSACTION_ABORTABLE (KIP-890); we never do, so it is v3.
ADD_OFFSETS_TO_TXN_API = Api(
    25, "AddOffsetsToTxn", 0, 4, 3,
    request=Struct(
        F("transactional_id", STRING),
        F("producer_id", INT64),
        F("producer_epoch", INT16),
        F("group_id", STRING),
    ),
    response=Struct(
        F("throttle_time_ms", INT32),
        F("error_code", INT16),
    ),
)

# v4 may answer TRANSACTION_ABORTABLE; v5 (KIP-890 part 2): every end bumps the epoch,
# and the answer carries the producer id and epoch to use next.
END_TXN_API = Api(
    26, "EndTxn", 0, 5, 3,
    request=Struct(
        F("transactional_id", STRING),
        F("producer_id", INT64),
        F("producer_epoch", INT16),
        F("committed", BOOL),
    ),
    response=Struct(
        F("throttle_time_ms", INT32),
        F("error_code", INT16),
        F("producer_id", INT64, "5+", default=-1),
        F("producer_epoch", INT16, "5+", default=-1),
    ),
)

# Sent by a transaction coordinator to partition leaders (inter-broker).
WRITE_TXN_MARKERS_API = Api(
    27, "WriteTxnMarkers", 0, 1, 1,
    request=Struct(
        F("markers", Array(Struct(
            F("producer_id", INT64),
            F("producer_epoch", INT16),
            F("transaction_result", BOOL),  # true: COMMIT, false: ABORT
            F("topics", Array(Struct(
                F("name", STRING),
                F("partition_indexes", Array(INT32)),
            ))),
            F("coordinator_epoch", INT32),
        ))),
    ),
    response=Struct(
        F("markers", Array(Struct(
            F("producer_id", INT64),
            F("topics", Array(Struct(
                F("name", STRING),
                F("partitions", Array(Struct(
                    F("partition_index", INT32),
                    F("error_code", INT16),
                ))),
            ))),
        ))),
    ),
)

# v4 may answer TRANSACTION_ABORTABLE (KIP-890); v5 (transaction version 2): the same
# fields, the group's offsets partition is added to the transaction by the broker
# (docs/contracts/transactions.md).
TXN_OFFSET_COMMIT_API = Api(
    28, "TxnOffsetCommit", 0, 5, 3,
    request=Struct(
        F("transactional_id", STRING),
        F("group_id", STRING),
        F("producer_id", INT64),
        F("producer_epoch", INT16),
        F("generation_id", INT32, "3+", default=-1),
        F("member_id", STRING, "3+", default=""),
        F("group_instance_id", STRING, "3+", nullable="3+", default=None),
        F("topics", Array(Struct(
            F("name", STRING),
            F("partitions", Array(Struct(
                F("partition_index", INT32),
                F("committed_offset", INT64),
                F("committed_leader_epoch", INT32, "2+", default=-1),
                F("committed_metadata", STRING, nullable="0+"),
            ))),
        ))),
    ),
    response=Struct(
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

# -- Transactions: tools and visibility (KIP-664; docs/contracts/transactions.md, "Tools
# and visibility"; DescribeProducers is with the cluster APIs). Flexible from their first
# version. ListTransactions v1 adds KIP-994's duration filter (its response is v0's).

DESCRIBE_TRANSACTIONS_API = Api(
    65, "DescribeTransactions", 0, 0, 0,
    request=Struct(
        F("transactional_ids", Array(STRING)),
    ),
    response=Struct(
        F("throttle_time_ms", INT32),
        F("transaction_states", Array(Struct(
            F("error_code", INT16),
            F("transactional_id", STRING),
            F("transaction_state", STRING),
            F("transaction_timeout_ms", INT32),
            F("transaction_start_time_ms", INT64),
            F("producer_id", INT64),
            F("producer_epoch", INT16),
            F("topics", Array(Struct(
                F("topic", STRING),
                F("partitions", Array(INT32)),
            ))),
        ))),
    ),
)

LIST_TRANSACTIONS_API = Api(
    66, "ListTransactions", 0, 1, 0,
    request=Struct(
        F("state_filters", Array(STRING)),
        F("producer_id_filters", Array(INT64)),
        F("duration_filter", INT64, "1+", default=-1),
    ),
    response=Struct(
        F("throttle_time_ms", INT32),
        F("error_code", INT16),
        F("unknown_state_filters", Array(STRING)),
        F("transaction_states", Array(Struct(
            F("transactional_id", STRING),
            F("producer_id", INT64),
            F("transaction_state", STRING),
        ))),
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
    4, "LeaderAndIsr", 3, 3, 4,
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
    5, "StopReplica", 1, 1, 2,
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
    6, "UpdateMetadata", 5, 5, 6,
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
    7, "ControlledShutdown", 2, 2, 3,
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
    23, "OffsetForLeaderEpoch", 0, 3, 4,
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
    37, "CreatePartitions", 0, 3, 2,
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
    43, "ElectLeaders", 0, 2, 2,
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
    60, "DescribeCluster", 0, 2, 0,
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

# KIP-664: the producers a partition leader tracks (docs/contracts/log.md, "Transactions").
DESCRIBE_PRODUCERS_API = Api(
    61, "DescribeProducers", 0, 0, 0,
    request=Struct(
        F("topics", Array(Struct(
            F("name", STRING),
            F("partition_indexes", Array(INT32)),
        ))),
    ),
    response=Struct(
        F("throttle_time_ms", INT32),
        F("topics", Array(Struct(
            F("name", STRING),
            F("partitions", Array(Struct(
                F("partition_index", INT32),
                F("error_code", INT16),
                F("error_message", STRING, nullable="0+", default=None),
                F("active_producers", Array(Struct(
                    F("producer_id", INT64),
                    F("producer_epoch", INT32),
                    F("last_sequence", INT32, default=-1),
                    F("last_timestamp", INT64, default=-1),
                    F("coordinator_epoch", INT32),
                    F("current_txn_start_offset", INT64, default=-1),
                ))),
            ))),
        ))),
    ),
)

# -- configs (resource types: 2 topic, 4 broker, 8 broker logger) --

DESCRIBE_CONFIGS_API = Api(
    32, "DescribeConfigs", 0, 4, 4,
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
    33, "AlterConfigs", 0, 2, 2,
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
    44, "IncrementalAlterConfigs", 0, 1, 1,
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
    35, "DescribeLogDirs", 0, 4, 2,
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
    45, "AlterPartitionReassignments", 0, 0, 0,
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
    46, "ListPartitionReassignments", 0, 0, 0,
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
    29, "DescribeAcls", 1, 3, 2,
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
    30, "CreateAcls", 1, 3, 2,
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
    31, "DeleteAcls", 1, 3, 2,
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

# -- security (docs/contracts/security.md) --

# Mechanism codes: 1 SCRAM-SHA-256, 2 SCRAM-SHA-512 (broker/security/scram.py).
DESCRIBE_USER_SCRAM_CREDENTIALS_API = Api(
    50, "DescribeUserScramCredentials", 0, 0, 0,
    request=Struct(
        # null or empty: every user.
        F("users", Array(Struct(
            F("name", STRING),
        )), nullable="0+", default=None),
    ),
    response=Struct(
        F("throttle_time_ms", INT32),
        F("error_code", INT16),
        F("error_message", STRING, nullable="0+", default=None),
        F("results", Array(Struct(
            F("user", STRING),
            F("error_code", INT16),
            F("error_message", STRING, nullable="0+", default=None),
            F("credential_infos", Array(Struct(
                F("mechanism", INT8),
                F("iterations", INT32),
            ))),
        ))),
    ),
)

ALTER_USER_SCRAM_CREDENTIALS_API = Api(
    51, "AlterUserScramCredentials", 0, 0, 0,
    request=Struct(
        F("deletions", Array(Struct(
            F("name", STRING),
            F("mechanism", INT8),
        ))),
        F("upsertions", Array(Struct(
            F("name", STRING),
            F("mechanism", INT8),
            F("iterations", INT32),
            F("salt", BYTES),
            F("salted_password", BYTES),
        ))),
    ),
    response=Struct(
        F("throttle_time_ms", INT32),
        F("results", Array(Struct(
            F("user", STRING),
            F("error_code", INT16),
            F("error_message", STRING, nullable="0+", default=None),
        ))),
    ),
)

# fmt: on


def _declared(namespace: dict[str, object]) -> dict[int, Api]:
    """Every `Api` declared in this module, by key (in key order)."""
    by_key: dict[int, Api] = {}
    for value in namespace.values():
        if isinstance(value, Api):
            if value.key in by_key:
                raise ValueError(f"API key {value.key}: {by_key[value.key].name} and {value.name}")
            by_key[value.key] = value
    return dict(sorted(by_key.items()))


# The tables below are derived from the declarations above, which are the only list of
# the APIs: adding an API is writing its `Api(...)`, nothing else here.
API_BY_KEY: dict[int, Api] = _declared(globals())

# The keys by Kafka's name in upper snake case (ApiKey.LIST_OFFSETS == 2) ...
ApiKey = enum.IntEnum(
    "ApiKey", [(api.constant, key) for key, api in API_BY_KEY.items()], module=__name__
)
# ... and as this module's constants (`from broker.protocol.apis import PRODUCE`), the
# way the standard library's `re` exports its flags.
globals().update(ApiKey.__members__)
