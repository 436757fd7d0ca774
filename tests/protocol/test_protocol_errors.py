"""The error table: one row per code gives the broker's code and the client's exception."""

from __future__ import annotations

import pytest

from broker.protocol import errors
from broker.protocol.errors import (
    ErrorCode,
    KafkaError,
    NotLeaderOrFollowerError,
    OffsetOutOfRangeError,
    TopicErrors,
    UnknownTopicOrPartitionError,
    error_for,
)


def test_every_code_has_a_message_and_its_own_exception_class():
    seen = set()
    for code in ErrorCode:
        if code == ErrorCode.NONE:
            continue
        cls = code.exception
        assert issubclass(cls, KafkaError) and cls.code == code
        assert cls not in seen
        seen.add(cls)
        assert code.message, code.name
        # Importable by its name, as the client code does.
        assert getattr(errors, cls.__name__) is cls


def test_class_names_follow_the_code_names():
    assert ErrorCode.NOT_LEADER_OR_FOLLOWER.exception is NotLeaderOrFollowerError
    assert ErrorCode.INVALID_TOPIC_EXCEPTION.exception.__name__ == "InvalidTopicError"
    assert ErrorCode.UNKNOWN_SERVER_ERROR.exception.__name__ == "UnknownServerError"
    assert ErrorCode.NETWORK_EXCEPTION.exception.__name__ == "NetworkError"


def test_retriability_is_read_from_the_row():
    assert NotLeaderOrFollowerError().retriable
    assert UnknownTopicOrPartitionError("x").retriable
    assert not ErrorCode.MESSAGE_TOO_LARGE.exception().retriable
    assert ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND.retriable


def test_error_for_picks_the_class_and_keeps_unknown_codes():
    exc = error_for(6, "moved")
    assert isinstance(exc, NotLeaderOrFollowerError) and str(exc) == "NOT_LEADER_OR_FOLLOWER: moved"
    future = error_for(4242, "from a newer broker")
    assert type(future) is errors.UnknownServerError
    assert "error code 4242" in str(future)
    # Offset-out-of-range needs the partition's offsets: error_for gives the generic class.
    generic = error_for(ErrorCode.OFFSET_OUT_OF_RANGE)
    assert type(generic) is KafkaError and generic.code == ErrorCode.OFFSET_OUT_OF_RANGE
    with pytest.raises(OffsetOutOfRangeError) as info:
        raise OffsetOutOfRangeError("t", 0, 99, 0, 10)
    assert info.value.high_watermark == 10 and not info.value.retriable


def test_topic_errors_carry_every_failure():
    exc = TopicErrors(
        "create",
        {"a": (ErrorCode.TOPIC_ALREADY_EXISTS, None), "b": (ErrorCode.INVALID_CONFIG, "x")},
    )
    assert exc.code == ErrorCode.TOPIC_ALREADY_EXISTS
    assert str(exc) == "create failed for a: TOPIC_ALREADY_EXISTS; b: INVALID_CONFIG (x)"
