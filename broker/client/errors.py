"""Exceptions of the client library.

Every error carries the Kafka error code it stands for (`.code`, an ErrorCode), so
callers can branch on the code or catch a subclass. `error_for(code, message)` maps a
code from a response to the most specific class; codes without a class of their own
become a plain KafkaClientError whose message names the code.
"""

from __future__ import annotations

from broker.protocol.errors import ErrorCode, retriable


class KafkaClientError(Exception):
    """An error from a broker response, or one the client raises on its behalf."""

    code: ErrorCode = ErrorCode.UNKNOWN_SERVER_ERROR

    def __init__(self, message: str | None = None, code: int | None = None):
        if code is not None:
            self.code = as_error_code(code)
        self.detail = message
        text = self.code.name if message is None else f"{self.code.name}: {message}"
        super().__init__(text)

    @property
    def retriable(self) -> bool:
        return retriable(self.code)


class KafkaConnectionError(KafkaClientError):
    """The connection to a broker failed or broke; the request may or may not have run."""

    code = ErrorCode.NETWORK_EXCEPTION


class KafkaTimeoutError(KafkaClientError):
    """No answer (or no success after retries) before the deadline."""

    code = ErrorCode.REQUEST_TIMED_OUT


class UnsupportedVersionError(KafkaClientError):
    """The broker and this client share no version of an API."""

    code = ErrorCode.UNSUPPORTED_VERSION


class UnknownTopicOrPartitionError(KafkaClientError):
    code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


class LeaderNotAvailableError(KafkaClientError):
    code = ErrorCode.LEADER_NOT_AVAILABLE


class NotLeaderError(KafkaClientError):
    code = ErrorCode.NOT_LEADER_OR_FOLLOWER


class OffsetOutOfRangeError(KafkaClientError):
    """The fetch offset lies outside [log_start_offset, high_watermark]."""

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


class MessageTooLargeError(KafkaClientError):
    code = ErrorCode.MESSAGE_TOO_LARGE


class TopicAlreadyExistsError(KafkaClientError):
    code = ErrorCode.TOPIC_ALREADY_EXISTS


class TopicErrors(KafkaClientError):
    """Some topics of an admin request failed: `.errors` maps name -> (ErrorCode, message)."""

    def __init__(self, operation: str, errors: dict[str, tuple[ErrorCode, str | None]]):
        self.errors = errors
        first = next(iter(errors.values()))[0]
        detail = "; ".join(
            f"{name}: {code.name}" + (f" ({msg})" if msg else "")
            for name, (code, msg) in errors.items()
        )
        self.code = first
        self.detail = f"{operation} failed for {detail}"
        # The codes are in the detail already; no leading code name as other errors have.
        Exception.__init__(self, self.detail)


_BY_CODE: dict[ErrorCode, type[KafkaClientError]] = {
    cls.code: cls
    for cls in (
        KafkaConnectionError,
        KafkaTimeoutError,
        UnsupportedVersionError,
        UnknownTopicOrPartitionError,
        LeaderNotAvailableError,
        NotLeaderError,
        MessageTooLargeError,
        TopicAlreadyExistsError,
    )
}


def as_error_code(code: int) -> ErrorCode:
    """The ErrorCode for a code from the wire; codes newer than our table are UNKNOWN_SERVER_ERROR."""
    try:
        return ErrorCode(code)
    except ValueError:
        return ErrorCode.UNKNOWN_SERVER_ERROR


def error_for(code: int, message: str | None = None) -> KafkaClientError:
    """The exception for an error code found in a response.

    Offset-out-of-range needs the partition's offsets, so it is built by the fetch
    path itself (OffsetOutOfRangeError); here it becomes a generic error.
    """
    error_code = as_error_code(code)
    if error_code != code:
        # A code newer than our table: keep the number so nothing is lost.
        message = f"error code {code}" + (f": {message}" if message else "")
    cls = _BY_CODE.get(error_code)
    if cls is None:
        return KafkaClientError(message, error_code)
    return cls(message)
