"""The fetch session cache on its own (KIP-227): creation, incremental fetches, epochs,
errors, eviction, forgotten partitions, and which partitions have news."""

from __future__ import annotations

import itertools

from broker.protocol.errors import ErrorCode
from broker.server.fetch_session import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    NO_SESSION,
    FetchSessionCache,
    next_epoch,
)


def preq(partition: int, offset: int = 0) -> dict:
    return {
        "partition": partition,
        "current_leader_epoch": -1,
        "fetch_offset": offset,
        "log_start_offset": -1,
        "partition_max_bytes": 1 << 20,
    }


def body(session_id=NO_SESSION, epoch=INITIAL_EPOCH, named=(), forgotten=(), topic="t") -> dict:
    return {
        "session_id": session_id,
        "session_epoch": epoch,
        "topics": [{"topic": topic, "partitions": [preq(p, o) for p, o in named]}] if named else [],
        "forgotten_topics_data": [{"topic": topic, "partitions": list(forgotten)}]
        if forgotten
        else [],
    }


def cache(**kw) -> FetchSessionCache:
    ids = itertools.count(1)
    return FetchSessionCache(new_id=lambda: next(ids), **kw)


def opened(c: FetchSessionCache, size: int, privileged=True, now=0):
    fetch = c.new_fetch(body(named=[(p, 0) for p in range(size)]), privileged, now)
    assert fetch.full and fetch.error == ErrorCode.NONE
    for tp, _ in fetch.partitions:  # answered in full: no data left beyond the offset
        fetch.session.settle(tp, (0, 0, 0), more=False)
    return fetch.session


def test_epoch_zero_opens_a_session_with_a_full_fetch():
    c = cache()
    fetch = c.new_fetch(body(named=[(0, 5), (1, 7)]), privileged=True, now_ms=10)
    assert fetch.full and fetch.session_id == 1 and fetch.session.epoch == 1
    assert [tp for tp, _ in fetch.partitions] == [("t", 0), ("t", 1)]
    assert len(c.sessions) == 1 and c.partitions_cached == 2


def test_epoch_minus_one_is_sessionless_and_closes_the_session_it_names():
    c = cache()
    session = opened(c, 3)
    fetch = c.new_fetch(body(session.id, FINAL_EPOCH, named=[(0, 0)]), True, 0)
    assert fetch.full and fetch.session_id == NO_SESSION and len(fetch.partitions) == 1
    assert c.sessions == {} and c.partitions_cached == 0


def test_epoch_zero_naming_a_session_replaces_it():
    c = cache()
    old = opened(c, 3)
    fetch = c.new_fetch(body(old.id, INITIAL_EPOCH, named=[(9, 0)]), True, 0)
    assert fetch.session_id not in (NO_SESSION, old.id)
    assert list(c.sessions) == [fetch.session_id] and c.partitions_cached == 1


def test_an_idle_incremental_fetch_covers_no_partition():
    c = cache()
    session = opened(c, 1000)
    fetch = c.new_fetch(body(session.id, 1), True, 0)
    assert not fetch.full and fetch.partitions == [] and fetch.session is session
    assert session.epoch == 2 and c.partitions_cached == 1000


def test_a_change_marks_only_that_partition_of_the_sessions_holding_it():
    c = cache()
    a, b = opened(c, 1000), opened(c, 10)
    assert set(c.partition_changed(("t", 500))) == {a}
    assert set(c.partition_changed(("t", 5))) == {a, b}
    assert list(c.partition_changed(("other", 5))) == []
    fetch = c.new_fetch(body(a.id, 1), True, 0)
    assert sorted(tp for tp, _ in fetch.partitions) == [("t", 5), ("t", 500)]


def test_named_partitions_update_the_session_and_forgotten_ones_leave_it():
    c = cache()
    session = opened(c, 3)
    fetch = c.new_fetch(body(session.id, 1, named=[(1, 40), (7, 0)], forgotten=[2]), True, 0)
    assert sorted(tp for tp, _ in fetch.partitions) == [("t", 1), ("t", 7)]
    assert session.partitions[("t", 1)]["fetch_offset"] == 40
    assert sorted(session.partitions) == [("t", 0), ("t", 1), ("t", 7)]
    assert c.partitions_cached == 3
    assert list(c.partition_changed(("t", 2))) == []  # forgotten: no longer told


def test_a_partition_with_data_left_stays_among_the_news():
    c = cache()
    session = opened(c, 2)
    c.partition_changed(("t", 0))
    c.partition_changed(("t", 1))
    session.settle(("t", 0), (5, 5, 0), more=True)  # cut by max_bytes, say
    session.settle(("t", 1), (5, 5, 0), more=False)
    fetch = c.new_fetch(body(session.id, 1), True, 0)
    assert [tp for tp, _ in fetch.partitions] == [("t", 0)]
    assert session.told[("t", 1)] == (5, 5, 0)


def test_epoch_errors():
    c = cache()
    session = opened(c, 2)
    wrong = c.new_fetch(body(session.id, 5), True, 0)
    assert wrong.error == ErrorCode.INVALID_FETCH_SESSION_EPOCH and session.epoch == 1
    missing = c.new_fetch(body(session.id + 100, 1), True, 0)
    assert missing.error == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    assert c.new_fetch(body(NO_SESSION, 1), True, 0).error == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    assert c.new_fetch(body(session.id, 1), True, 0).error == ErrorCode.NONE


def test_epochs_wrap_to_one():
    assert next_epoch(1) == 2 and next_epoch(0x7FFFFFFF) == 1
    c = cache()
    session = opened(c, 1)
    session.epoch = 0x7FFFFFFF
    assert c.new_fetch(body(session.id, 0x7FFFFFFF), True, 0).error == ErrorCode.NONE
    assert session.epoch == 1


def test_a_full_cache_answers_without_a_session():
    c = cache(max_slots=1, min_eviction_ms=1000)
    opened(c, 5, privileged=False)
    fetch = c.new_fetch(body(named=[(0, 0)]), privileged=False, now_ms=500)
    assert fetch.full and fetch.session_id == NO_SESSION and len(fetch.partitions) == 1
    assert len(c.sessions) == 1 and c.evictions == 0


def test_eviction_prefers_stale_then_consumers_then_smaller_sessions():
    c = cache(max_slots=2, min_eviction_ms=1000)
    follower = opened(c, 5, privileged=True, now=0)
    consumer = opened(c, 50, privileged=False, now=0)
    # A follower may displace a consumer's session at once, whatever its size.
    newcomer = c.new_fetch(body(named=[(0, 0)]), True, 10).session
    assert newcomer is not None and set(c.sessions) == {follower.id, newcomer.id}
    assert consumer.id not in c.sessions and c.evictions == 1
    # A consumer may not displace followers younger than the eviction time...
    assert c.new_fetch(body(named=[(0, 0)]), False, 20).session is None
    # ...nor, once they are older, a larger or more privileged one: the smaller goes.
    c.new_fetch(body(follower.id, 1), True, 1500)  # keeps the follower's session in use
    c.new_fetch(body(newcomer.id, 1), True, 1500)
    assert c.new_fetch(body(named=[(0, 0)]), False, 1600).session is None
    bigger = c.new_fetch(body(named=[(p, 0) for p in range(9)]), True, 1700).session
    assert bigger is not None and set(c.sessions) == {follower.id, bigger.id}
    # One unused for the eviction time goes first, whatever its worth.
    late = c.new_fetch(body(named=[(0, 0)]), False, 3000).session
    assert late is not None and follower.id not in c.sessions and c.evictions == 3
    assert c.partitions_cached == 9 + 1
