"""Fetch sessions through the dispatcher (no sockets): what an incremental fetch names,
answers and reads, counted by the broker's fetch tallies, never timed."""

from __future__ import annotations

import os

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from broker.metrics.definitions import BrokerMetrics
from broker.metrics.state import BrokerStateCollector
from broker.protocol.apis import FETCH
from broker.protocol.errors import ErrorCode
from tests.helpers.inprocess_broker import Respond, Wait
from tests.helpers.metrics import Scrape
from tests.helpers.server_requests import create, produce, values


@pytest.fixture(autouse=True)
def _no_fsync(monkeypatch):
    # Creating hundreds of logs fsyncs each; durability is not what these tests count.
    monkeypatch.setattr(os, "fsync", lambda fd: None)


def session_body(
    session_id: int, epoch: int, named=(), size: int = 0, replica_id: int = -1, max_wait_ms=0
) -> dict:
    """A fetch of topic t: `named` (partition, offset) pairs, or partitions 0..size-1."""
    named = list(named) or [(p, 0) for p in range(size)]
    return {
        "replica_id": replica_id, "max_wait_ms": max_wait_ms, "min_bytes": 1,
        "max_bytes": 1 << 20, "isolation_level": 0,
        "session_id": session_id, "session_epoch": epoch,
        "topics": [{"topic": "t", "partitions": [
            {"partition": p, "current_leader_epoch": -1, "fetch_offset": o,
             "log_start_offset": -1, "partition_max_bytes": 1 << 20}
            for p, o in named
        ]}] if named else [],
        "forgotten_topics_data": [], "rack_id": "",
    }  # fmt: skip


def answered(response: dict) -> list[tuple[int, int]]:
    """(partition, records bytes) per partition of an answer."""
    return [(p["partition_index"], len(p["records"])) for t in response["responses"] for p in t["partitions"]]  # fmt: skip


def tally(broker, fetcher: str):
    t = broker.state.metrics.fetches[fetcher]
    return t.responses, t.requested, t.answered, t.reads


@pytest.mark.parametrize("replica_id", [-1, 1], ids=["consumer", "follower"])
@pytest.mark.parametrize("size", [10, 300])
def test_one_append_costs_the_same_whatever_the_session_size(broker, size, replica_id):
    broker.state.metrics = BrokerMetrics()
    fetcher = "follower" if replica_id >= 0 else "consumer"
    create(broker, "t", partitions=size)
    full = broker.call(FETCH, 11, session_body(0, 0, size=size, replica_id=replica_id))
    session_id = full["session_id"]
    assert session_id != 0 and len(answered(full)) == size
    assert tally(broker, fetcher) == (1, size, size, size)
    assert len(broker.state.fetch_sessions.sessions) == 1
    assert broker.state.fetch_sessions.partitions_cached == size

    # Idle: the incremental fetch names nothing and its answer carries nothing.
    idle = broker.call(FETCH, 11, session_body(session_id, 1, replica_id=replica_id))
    assert idle["error_code"] == 0 and idle["session_id"] == session_id
    assert answered(idle) == [] and tally(broker, fetcher) == (2, size, size, size)

    # Parked, then one append to one partition: one read, which the answer takes as it is.
    outcome = broker.send(FETCH, 11, session_body(session_id, 2, replica_id=replica_id, max_wait_ms=500))  # fmt: skip
    assert isinstance(outcome, Wait) and len(broker.state.fetch_purgatory) == 1
    assert broker.state.fetch_purgatory.watched_keys() == 1  # the session, not its partitions
    produce(broker, "t", values(b"x"), partition=size // 2)
    response = broker.decode(FETCH, 11, broker.answer_of(outcome))
    [(index, nbytes)] = answered(response)
    assert index == size // 2 and nbytes > 0
    assert tally(broker, fetcher) == (3, size, size + 1, size + 1)

    # The fetcher moves on: it names that partition at its new offset; nothing else.
    moved = broker.call(FETCH, 11, session_body(session_id, 3, named=[(size // 2, 1)], replica_id=replica_id))  # fmt: skip
    assert answered(moved) == [] and tally(broker, fetcher) == (4, size + 1, size + 1, size + 2)


def test_consumer_sessions_answer_high_watermark_moves_and_errors_only_once(broker):
    broker.state.metrics = BrokerMetrics()
    create(broker, "t", partitions=3)
    produce(broker, "t", values(b"a"), partition=1)
    full = broker.call(FETCH, 11, session_body(0, 0, size=3))
    assert sorted(answered(full))[1][1] > 0
    sid = full["session_id"]
    # Partition 1 still has data beyond the offset the session holds (the consumer did
    # not move on): it is answered again, the others not.
    again = broker.call(FETCH, 11, session_body(sid, 1))
    assert [p for p, _ in answered(again)] == [1]
    broker.call(FETCH, 11, session_body(sid, 2, named=[(1, 1)]))
    assert answered(broker.call(FETCH, 11, session_body(sid, 3))) == []
    # A partition named past its end answers its error once, then is quiet.
    error = broker.call(FETCH, 11, session_body(sid, 4, named=[(2, 99)]))
    [(part,)] = [[p for p in t["partitions"]] for t in error["responses"]]
    assert (part["partition_index"], part["error_code"]) == (2, ErrorCode.OFFSET_OUT_OF_RANGE)
    assert answered(broker.call(FETCH, 11, session_body(sid, 5))) == []


def test_session_errors_and_sessionless_fetches(broker):
    create(broker, "t", partitions=2)
    missing = broker.call(FETCH, 11, session_body(12345, 1))
    assert missing["error_code"] == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    assert missing["responses"] == []
    sid = broker.call(FETCH, 11, session_body(0, 0, size=2))["session_id"]
    wrong = broker.call(FETCH, 11, session_body(sid, 7))
    assert wrong["error_code"] == ErrorCode.INVALID_FETCH_SESSION_EPOCH
    closing = broker.call(FETCH, 11, session_body(sid, -1, size=2))
    assert closing["session_id"] == 0 and len(answered(closing)) == 2
    assert broker.state.fetch_sessions.sessions == {}
    # Before v7 there are no sessions: every fetch is full.
    old = broker.send(FETCH, 6, session_body(0, -1, size=2))
    assert isinstance(old, Respond) and len(answered(broker.decode(FETCH, 6, old))) == 2


def test_the_counts_are_exported(broker):
    broker.state.metrics = BrokerMetrics()
    create(broker, "t", partitions=4)
    sid = broker.call(FETCH, 11, session_body(0, 0, size=4, replica_id=1))["session_id"]
    broker.call(FETCH, 11, session_body(sid, 1, replica_id=1))
    events = Scrape(generate_latest(broker.state.metrics.registry).decode())
    assert events.value("kafka_fetch_responses_total", fetcher="follower") == 2
    assert events.value("kafka_fetch_partitions_requested_total", fetcher="follower") == 4
    assert events.value("kafka_fetch_partitions_answered_total", fetcher="follower") == 4
    assert events.value("kafka_fetch_partition_reads_total", fetcher="follower") == 4
    assert events.value("kafka_fetch_responses_total", fetcher="consumer") == 0
    registry = CollectorRegistry()
    registry.register(BrokerStateCollector(broker.state, lambda: {}))
    state = Scrape(generate_latest(registry).decode())
    assert state.value("kafka_fetch_sessions") == 1
    assert state.value("kafka_fetch_session_partitions") == 4
    assert state.value("kafka_fetch_session_evictions_total") == 0
