"""Frames the dispatcher must refuse or route, and the versions it advertises."""

from __future__ import annotations

import struct
from dataclasses import replace

import pytest

from broker.protocol.apis import API_BY_KEY, API_VERSIONS, CREATE_TOPICS, METADATA, PRODUCE
from broker.protocol.errors import ErrorCode
from broker.protocol.framing import decode_response
from broker.server.handlers import HANDLERS
from tests.helpers.inprocess_broker import Close, Respond, response_bytes


def test_api_versions_lists_every_api_with_a_handler_at_its_declared_range(broker):
    for version in range(4):
        body = broker.call(API_VERSIONS, version, {
            "client_software_name": "t", "client_software_version": "1"
        })  # fmt: skip
        assert body["error_code"] == 0
        ranges = {k["api_key"]: (k["min_version"], k["max_version"]) for k in body["api_keys"]}
        assert ranges == {
            key: (API_BY_KEY[key].min_version, API_BY_KEY[key].max_version) for key in HANDLERS
        }
    # Every declared API has its handler: none is declared and left unserved.
    assert set(HANDLERS) == set(API_BY_KEY)


def test_api_versions_above_ours_is_answered_in_v0_with_our_ranges(broker):
    frame = bytearray(broker.frame(API_VERSIONS, 3, {
        "client_software_name": "t", "client_software_version": "1"
    }))  # fmt: skip
    struct.pack_into(">h", frame, 2, 9)  # a version from the future, body unreadable to us
    outcome = broker.outcome(bytes(frame))
    assert isinstance(outcome, Respond)
    _, body = decode_response(API_VERSIONS, 0, response_bytes(outcome.parts))
    assert body["error_code"] == ErrorCode.UNSUPPORTED_VERSION
    # ApiVersions alone, as Kafka (KIP-511): the client asks again for the rest.
    assert body["api_keys"] == [{"api_key": API_VERSIONS, "min_version": 0, "max_version": 3}]


def test_produce_below_the_accepted_range_gets_unsupported_version(broker):
    body = {"acks": 1, "timeout_ms": 1000, "topic_data": [
        {"name": "t", "partition_data": [{"index": 0, "records": b"x"}]}
    ]}  # fmt: skip
    answer = broker.call(PRODUCE, 2, body)
    (p,) = answer["responses"][0]["partition_responses"]
    assert p["error_code"] == ErrorCode.UNSUPPORTED_VERSION


@pytest.mark.parametrize(
    ("frame", "reason"),
    [
        (b"\x00", "malformed request header"),
        (struct.pack(">hhi", 999, 0, 1) + b"\x00\x00", "unsupported API 999"),
        (struct.pack(">hhi", METADATA, 99, 1) + b"\x00\x00", "unsupported API 3 v99"),
        # Metadata v1: a topics array that claims 1000 entries and holds none.
        (struct.pack(">hhih", METADATA, 1, 1, 0) + struct.pack(">i", 1000), "malformed Metadata"),
    ],
)
def test_frames_that_cost_the_connection(broker, frame, reason):
    outcome = broker.outcome(frame)
    assert isinstance(outcome, Close) and outcome.reason.startswith(reason)


def test_a_handler_bug_costs_only_the_connection(broker, monkeypatch):
    def explode(*args):
        raise RuntimeError("bug")

    monkeypatch.setitem(HANDLERS, CREATE_TOPICS, replace(HANDLERS[CREATE_TOPICS], handle=explode))
    outcome = broker.send(CREATE_TOPICS, 4, {"topics": [], "timeout_ms": 1, "validate_only": False})
    assert outcome == Close("internal error")
