"""The one table of Kafka errors: one row per code, as Kafka's `Errors.java` keeps them.

Each row of `ErrorCode` holds the code, whether a client should retry the request that
got it, and a default message; `ErrorCode.X.exception` is the exception class for the
code (a `KafkaError` subclass, generated from the row and importable by name:
`UnknownTopicOrPartitionError`, `NotLeaderOrFollowerError`, ...). The broker answers with
the codes, our client raises the exceptions, both read the same row.

Codes and names are Kafka's (facts of the protocol); retriability follows whether Kafka's
exception for the code is a `RetriableException`, because clients decide to retry, or to
give up and surface the error, on exactly that. The messages are ours.
"""

from __future__ import annotations

import enum

R = True  # retriable
F = False  # not retriable: surfaced to the caller


class ErrorCode(enum.IntEnum):
    retriable: bool
    message: str

    def __new__(cls, code: int, retriable: bool, message: str) -> ErrorCode:
        member = int.__new__(cls, code)
        member._value_ = code
        member.retriable = retriable
        member.message = message
        return member

    # fmt: off
    UNKNOWN_SERVER_ERROR = -1, F, "The server failed unexpectedly while handling the request."
    NONE = 0, F, ""
    OFFSET_OUT_OF_RANGE = 1, F, "The offset is outside the range the partition holds."
    CORRUPT_MESSAGE = 2, R, "A record batch failed its CRC, or is malformed or truncated."
    UNKNOWN_TOPIC_OR_PARTITION = 3, R, "This server does not host this topic-partition."
    INVALID_FETCH_SIZE = 4, F, "The requested fetch size is invalid."
    LEADER_NOT_AVAILABLE = 5, R, "The partition has no leader right now (an election is under way)."
    NOT_LEADER_OR_FOLLOWER = 6, R, "This server is not the leader (or a follower) of the partition."
    REQUEST_TIMED_OUT = 7, R, "The request timed out."
    BROKER_NOT_AVAILABLE = 8, F, "The broker is not available."
    REPLICA_NOT_AVAILABLE = 9, R, "The replica is not available for the partition."
    MESSAGE_TOO_LARGE = 10, F, "The record batch is larger than the largest the server accepts."
    STALE_CONTROLLER_EPOCH = 11, F, "The request came from a controller older than the newest seen."
    OFFSET_METADATA_TOO_LARGE = 12, F, "The metadata of the committed offset is too large."
    NETWORK_EXCEPTION = 13, R, "The connection broke before a response arrived."
    COORDINATOR_LOAD_IN_PROGRESS = 14, R, "The coordinator is still loading the group's state."
    COORDINATOR_NOT_AVAILABLE = 15, R, "The coordinator is not available."
    NOT_COORDINATOR = 16, R, "This server is not the coordinator of the group."
    INVALID_TOPIC_EXCEPTION = 17, F, "The topic name is illegal, or the topic cannot be written to."
    RECORD_LIST_TOO_LARGE = 18, F, "The batches of the request exceed the segment size."
    NOT_ENOUGH_REPLICAS = 19, R, "Fewer in-sync replicas than min.insync.replicas: not appended."
    NOT_ENOUGH_REPLICAS_AFTER_APPEND = 20, R, "Appended, but fewer in-sync replicas than required."
    INVALID_REQUIRED_ACKS = 21, F, "acks must be -1 (all), 0 or 1."
    ILLEGAL_GENERATION = 22, F, "The group generation of the request is not the current one."
    INCONSISTENT_GROUP_PROTOCOL = 23, F, "The member's protocol type or protocols do not match the group's."
    INVALID_GROUP_ID = 24, F, "The group id is empty or illegal."
    UNKNOWN_MEMBER_ID = 25, F, "The coordinator does not know this member id."
    INVALID_SESSION_TIMEOUT = 26, F, "The session timeout is outside the broker's allowed range."
    REBALANCE_IN_PROGRESS = 27, F, "The group is rebalancing; rejoin."
    INVALID_COMMIT_OFFSET_SIZE = 28, F, "The committed offset's metadata is too large."
    TOPIC_AUTHORIZATION_FAILED = 29, F, "Not authorized to access the topic."
    GROUP_AUTHORIZATION_FAILED = 30, F, "Not authorized to access the group."
    CLUSTER_AUTHORIZATION_FAILED = 31, F, "Not authorized for this cluster operation."
    INVALID_TIMESTAMP = 32, F, "A record's timestamp is outside the accepted range."
    UNSUPPORTED_SASL_MECHANISM = 33, F, "The broker does not support this SASL mechanism."
    ILLEGAL_SASL_STATE = 34, F, "The request is not valid in the current SASL state."
    UNSUPPORTED_VERSION = 35, F, "The server does not support this version of the API."
    TOPIC_ALREADY_EXISTS = 36, F, "The topic already exists."
    INVALID_PARTITIONS = 37, F, "The number of partitions is invalid."
    INVALID_REPLICATION_FACTOR = 38, F, "The replication factor is invalid."
    INVALID_REPLICA_ASSIGNMENT = 39, F, "The replica assignment is invalid."
    INVALID_CONFIG = 40, F, "A configuration value is invalid."
    NOT_CONTROLLER = 41, R, "This server is not the controller."
    INVALID_REQUEST = 42, F, "The request is malformed or breaks the protocol's rules."
    UNSUPPORTED_FOR_MESSAGE_FORMAT = 43, F, "The message format does not support this request."
    POLICY_VIOLATION = 44, F, "The request breaks a configured policy."
    OUT_OF_ORDER_SEQUENCE_NUMBER = 45, F, "The producer sequence is not the next one expected."
    DUPLICATE_SEQUENCE_NUMBER = 46, F, "The producer sequence was already written."
    INVALID_PRODUCER_EPOCH = 47, F, "The producer epoch is older than the current one (fenced)."
    INVALID_TXN_STATE = 48, F, "The operation is not valid in the transaction's state."
    INVALID_PRODUCER_ID_MAPPING = 49, F, "The producer id does not match the transactional id."
    INVALID_TRANSACTION_TIMEOUT = 50, F, "The transaction timeout exceeds the broker's maximum."
    CONCURRENT_TRANSACTIONS = 51, R, "Another transaction of this producer is still completing."
    TRANSACTION_COORDINATOR_FENCED = 52, F, "A newer transaction coordinator has taken over."
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53, F, "Not authorized for this transactional id."
    SECURITY_DISABLED = 54, F, "Security features are disabled."
    OPERATION_NOT_ATTEMPTED = 55, F, "Not attempted because another part of the request failed."
    KAFKA_STORAGE_ERROR = 56, R, "A disk error on the server: the log directory is offline."
    LOG_DIR_NOT_FOUND = 57, F, "The log directory does not exist."
    SASL_AUTHENTICATION_FAILED = 58, F, "SASL authentication failed."
    UNKNOWN_PRODUCER_ID = 59, F, "The broker no longer knows this producer id."
    REASSIGNMENT_IN_PROGRESS = 60, F, "A reassignment of the partition is in progress."
    DELEGATION_TOKEN_AUTH_DISABLED = 61, F, "Delegation-token authentication is disabled."
    DELEGATION_TOKEN_NOT_FOUND = 62, F, "The delegation token does not exist."
    DELEGATION_TOKEN_OWNER_MISMATCH = 63, F, "The principal does not own the delegation token."
    DELEGATION_TOKEN_REQUEST_NOT_ALLOWED = 64, F, "Delegation-token requests are not allowed here."
    DELEGATION_TOKEN_AUTHORIZATION_FAILED = 65, F, "Not authorized for the delegation token."
    DELEGATION_TOKEN_EXPIRED = 66, F, "The delegation token has expired."
    INVALID_PRINCIPAL_TYPE = 67, F, "The principal type is not supported."
    NON_EMPTY_GROUP = 68, F, "The group still has members."
    GROUP_ID_NOT_FOUND = 69, F, "The group does not exist."
    FETCH_SESSION_ID_NOT_FOUND = 70, R, "The fetch session does not exist."
    INVALID_FETCH_SESSION_EPOCH = 71, R, "The fetch session epoch is not the next one."
    LISTENER_NOT_FOUND = 72, R, "The leader has no endpoint on the listener of the request."
    TOPIC_DELETION_DISABLED = 73, F, "Topic deletion is disabled (delete.topic.enable=false)."
    FENCED_LEADER_EPOCH = 74, R, "The leader epoch of the request is older than the broker's."
    UNKNOWN_LEADER_EPOCH = 75, R, "The leader epoch of the request is newer than the broker's."
    UNSUPPORTED_COMPRESSION_TYPE = 76, F, "The consumer's fetch version cannot carry this compression."
    STALE_BROKER_EPOCH = 77, F, "The broker epoch is older than the current one."
    OFFSET_NOT_AVAILABLE = 78, R, "The leader's high watermark has not caught up to its log end yet."
    MEMBER_ID_REQUIRED = 79, F, "Join again with the member id in this response."
    PREFERRED_LEADER_NOT_AVAILABLE = 80, R, "The preferred leader is not available."
    GROUP_MAX_SIZE_REACHED = 81, F, "The group has reached group.max.size members."
    FENCED_INSTANCE_ID = 82, F, "Another member with this group.instance.id has replaced this one."
    ELIGIBLE_LEADERS_NOT_AVAILABLE = 83, R, "No eligible replica can become leader."
    ELECTION_NOT_NEEDED = 84, R, "The election is not needed: the leader is already the wanted one."
    NO_REASSIGNMENT_IN_PROGRESS = 85, F, "No reassignment of the partition is in progress."
    GROUP_SUBSCRIBED_TO_TOPIC = 86, F, "The group is subscribed to the topic, its offsets stay."
    INVALID_RECORD = 87, F, "A record failed validation (e.g. an old message format)."
    UNSTABLE_OFFSET_COMMIT = 88, R, "Offsets of pending transactions are not stable yet."
    THROTTLING_QUOTA_EXCEEDED = 89, R, "The request exceeds a throttling quota."
    PRODUCER_FENCED = 90, F, "A newer producer with the same transactional id fenced this one."
    RESOURCE_NOT_FOUND = 91, F, "The resource does not exist."
    DUPLICATE_RESOURCE = 92, F, "The resource appears twice in the request."
    UNACCEPTABLE_CREDENTIAL = 93, F, "The credential does not meet the requirements."
    INCONSISTENT_VOTER_SET = 94, F, "The voter set of the request does not match the quorum's."
    INVALID_UPDATE_VERSION = 95, F, "The update version is invalid."
    FEATURE_UPDATE_FAILED = 96, F, "The feature update failed."
    PRINCIPAL_DESERIALIZATION_FAILURE = 97, F, "The forwarded principal could not be read."
    SNAPSHOT_NOT_FOUND = 98, F, "The snapshot does not exist."
    POSITION_OUT_OF_RANGE = 99, F, "The position is outside the snapshot."
    UNKNOWN_TOPIC_ID = 100, R, "This server does not know the topic id."
    DUPLICATE_BROKER_REGISTRATION = 101, F, "This broker id is already registered."
    BROKER_ID_NOT_REGISTERED = 102, F, "The broker id is not registered."
    INCONSISTENT_TOPIC_ID = 103, R, "The topic id does not match the one of the partition's log."
    INCONSISTENT_CLUSTER_ID = 104, F, "The cluster id does not match."
    TRANSACTIONAL_ID_NOT_FOUND = 105, F, "The transactional id does not exist."
    FETCH_SESSION_TOPIC_ID_ERROR = 106, R, "The fetch session's topic ids changed."
    INELIGIBLE_REPLICA = 107, F, "The replica cannot join the ISR."
    NEW_LEADER_ELECTED = 108, F, "A new leader was elected while the request waited."
    OFFSET_MOVED_TO_TIERED_STORAGE = 109, F, "The offset moved to tiered storage."
    FENCED_MEMBER_EPOCH = 110, F, "The member epoch is fenced."
    UNRELEASED_INSTANCE_ID = 111, F, "The instance id is still held by another member."
    UNSUPPORTED_ASSIGNOR = 112, F, "The assignor is not supported."
    STALE_MEMBER_EPOCH = 113, F, "The member epoch is stale."
    MISMATCHED_ENDPOINT_TYPE = 114, F, "The request was sent to the wrong kind of endpoint."
    UNSUPPORTED_ENDPOINT_TYPE = 115, F, "The endpoint type is not supported."
    UNKNOWN_CONTROLLER_ID = 116, F, "The controller id is unknown."
    UNKNOWN_SUBSCRIPTION_ID = 117, F, "The client telemetry subscription id is unknown."
    TELEMETRY_TOO_LARGE = 118, F, "The client telemetry is too large."
    INVALID_REGISTRATION = 119, F, "The broker registration is invalid."
    TRANSACTION_ABORTABLE = 120, F, "The transaction must be aborted."
    INVALID_RECORD_STATE = 121, F, "The record state is invalid."
    SHARE_SESSION_NOT_FOUND = 122, R, "The share session does not exist."
    INVALID_SHARE_SESSION_EPOCH = 123, R, "The share session epoch is invalid."
    FENCED_STATE_EPOCH = 124, F, "The share state epoch is fenced."
    INVALID_VOTER_KEY = 125, F, "The voter key is invalid."
    DUPLICATE_VOTER = 126, F, "The voter is already in the quorum."
    VOTER_NOT_FOUND = 127, F, "The voter is not in the quorum."
    INVALID_REGULAR_EXPRESSION = 128, F, "The regular expression is invalid."
    # fmt: on

    @property
    def exception(self) -> type[KafkaError]:
        """The exception class our client raises for this code."""
        return _EXCEPTIONS[self]


def retriable(code: int) -> bool:
    """True when a client is expected to retry the request that got `code`."""
    return as_error_code(code).retriable


def as_error_code(code: int) -> ErrorCode:
    """The ErrorCode for a code from the wire; a code newer than our table is
    UNKNOWN_SERVER_ERROR (the callers keep the number in the message)."""
    try:
        return ErrorCode(code)
    except ValueError:
        return ErrorCode.UNKNOWN_SERVER_ERROR


class Refused(Exception):
    """The broker refuses one part of a request (a topic, a config resource): the code to
    answer that part with and a message for the client. Raised and caught inside the
    broker; a client raises KafkaError instead."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class KafkaError(Exception):
    """An error a broker answered with, or one our client raises on a broker's behalf.

    `.code` is its ErrorCode, `.retriable` and the default message come from the table;
    catch a subclass (e.g. `NotLeaderOrFollowerError`) or branch on `.code`.
    """

    code: ErrorCode = ErrorCode.UNKNOWN_SERVER_ERROR

    def __init__(self, message: str | None = None, code: int | None = None):
        if code is not None:
            self.code = as_error_code(code)
        self.detail = message
        text = self.code.name if message is None else f"{self.code.name}: {message}"
        super().__init__(text)

    @property
    def retriable(self) -> bool:
        return self.code.retriable


class OffsetOutOfRangeError(KafkaError):
    """The fetch offset lies outside [log_start_offset, high_watermark]; carries both so
    a reader can reset its position."""

    code = ErrorCode.OFFSET_OUT_OF_RANGE

    def __init__(
        self,
        topic: str,
        partition: int,
        offset: int,
        log_start_offset: int = -1,
        high_watermark: int = -1,
    ):
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.log_start_offset = log_start_offset
        self.high_watermark = high_watermark
        super().__init__(
            f"offset {offset} of {topic}-{partition} is outside the log "
            f"(log start offset {log_start_offset}, high watermark {high_watermark})"
        )


class TopicErrors(KafkaError):
    """Some topics of an admin request failed: `.errors` maps name -> (ErrorCode, message);
    `.code` is the first failure's."""

    def __init__(self, operation: str, errors: dict[str, tuple[ErrorCode, str | None]]):
        self.errors = errors
        self.code = next(iter(errors.values()))[0]
        self.detail = f"{operation} failed for " + "; ".join(
            f"{name}: {code.name}" + (f" ({msg})" if msg else "")
            for name, (code, msg) in errors.items()
        )
        # The codes are in the detail already; no leading code name as other errors have.
        Exception.__init__(self, self.detail)


def _exception_name(code: ErrorCode) -> str:
    # NOT_LEADER_OR_FOLLOWER -> NotLeaderOrFollowerError; INVALID_TOPIC_EXCEPTION and
    # UNKNOWN_SERVER_ERROR lose their own suffix first.
    words = code.name.removesuffix("_EXCEPTION").removesuffix("_ERROR").split("_")
    return "".join(w.capitalize() for w in words) + "Error"


# One class per row, generated so the table stays the only list of errors; the classes
# with extra fields are declared above and take their row's place.
_EXCEPTIONS: dict[ErrorCode, type[KafkaError]] = {OffsetOutOfRangeError.code: OffsetOutOfRangeError}
for _code in ErrorCode:
    if _code not in _EXCEPTIONS and _code != ErrorCode.NONE:
        _EXCEPTIONS[_code] = type(
            _exception_name(_code),
            (KafkaError,),
            {"code": _code, "__doc__": _code.message, "__module__": __name__},
        )
globals().update({cls.__name__: cls for cls in _EXCEPTIONS.values()})
del _code


def error_for(code: int, message: str | None = None) -> KafkaError:
    """The exception for an error code found in a response.

    Offset-out-of-range needs the partition's offsets, so the fetch path builds it
    itself (OffsetOutOfRangeError); here it becomes the generic class of its code.
    """
    error_code = as_error_code(code)
    if error_code != code:
        # A code newer than our table: keep the number so nothing is lost.
        message = f"error code {code}" + (f": {message}" if message else "")
    cls = _EXCEPTIONS.get(error_code, KafkaError)
    if cls is OffsetOutOfRangeError:
        return KafkaError(message, error_code)
    return cls(message)
