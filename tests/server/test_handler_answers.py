"""The per-topic and per-partition answer shapes the handlers share (handlers/answers.py)."""

from __future__ import annotations

from broker.protocol.errors import ErrorCode
from broker.server.handlers.answers import (
    by_topic,
    partition_errors,
    per_partition,
    topic_results,
)


class _Refused(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        self.code, self.message = code, message


def test_per_partition_follows_the_request_even_a_topic_asked_twice():
    asked = [
        {"topic": "b", "partitions": [{"partition": 1}, {"partition": 0}]},
        {"topic": "a", "partitions": []},
        {"topic": "b", "partitions": [{"partition": 2}]},
    ]
    answers = per_partition(asked, lambda t, p: {"seen": (t, p["partition"])}, "topic")
    assert answers == [
        {"topic": "b", "partitions": [{"seen": ("b", 1)}, {"seen": ("b", 0)}]},
        {"topic": "a", "partitions": []},
        {"topic": "b", "partitions": [{"seen": ("b", 2)}]},
    ]


def test_partition_errors_answer_each_partition_with_its_code():
    asked = [{"name": "t", "partitions": [{"partition_index": 1}, {"partition_index": 0}]}]
    errors = {("t", 0): ErrorCode.NONE, ("t", 1): ErrorCode.TOPIC_AUTHORIZATION_FAILED}
    assert partition_errors(asked, errors) == [
        {
            "name": "t",
            "partitions": [
                {"partition_index": 1, "error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED},
                {"partition_index": 0, "error_code": ErrorCode.NONE},
            ],
        }
    ]


def test_by_topic_sorts_and_groups_under_the_keys_the_api_wants():
    results = {("b", 0): "x", ("a", 2): "y", ("a", 1): "z"}
    grouped = by_topic(
        results, lambda p, r: {"id": p, "r": r}, topic_key="topic", partitions_key="result"
    )
    assert grouped == [
        {"topic": "a", "result": [{"id": 1, "r": "z"}, {"id": 2, "r": "y"}]},
        {"topic": "b", "result": [{"id": 0, "r": "x"}]},
    ]
    assert by_topic({}, lambda p, r: {}) == []


def test_topic_results_in_the_order_given_errors_or_the_default():
    errors = {"bad": _Refused(ErrorCode.INVALID_REQUEST, "no"), "ok": None}
    assert topic_results(["ok", "bad", "unlisted"], errors) == [
        {"name": "ok", "error_code": ErrorCode.NONE, "error_message": None},
        {"name": "bad", "error_code": ErrorCode.INVALID_REQUEST, "error_message": "no"},
        {"name": "unlisted", "error_code": ErrorCode.NONE, "error_message": None},
    ]
    assert topic_results(["a"], {}, ErrorCode.NOT_CONTROLLER) == [
        {"name": "a", "error_code": ErrorCode.NOT_CONTROLLER, "error_message": None}
    ]
