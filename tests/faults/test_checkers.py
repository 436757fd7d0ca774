"""The checkers on hand-made histories: each anomaly they exist for is found, and a clean
history has none."""

from __future__ import annotations

from tests.faults.checkers import (
    group_anomalies,
    producer_anomalies,
    registry_anomalies,
    total,
    transaction_anomalies,
)
from tests.faults.history import History


def sends(*acked):
    h = History()
    for number, partition, offset in acked:
        h.invoke("send", "p", number)
        h.ok("send", "p", (number, partition, offset))
    return h


def kinds(anomalies):
    return sorted(a.kind for a in anomalies)


def test_a_clean_producer_history_has_no_anomaly():
    h = sends((0, 0, 0), (1, 1, 0), (2, 0, 1))
    assert producer_anomalies(h, {0: [(0, 0), (1, 2)], 1: [(0, 1)]}) == []


def test_lost_moved_duplicated_and_reordered_writes_are_found():
    h = sends((0, 0, 0), (1, 0, 1), (2, 0, 2), (3, 1, 0))
    read = {0: [(0, 0), (1, 2), (1, 2), (3, 3)], 1: []}
    assert kinds(producer_anomalies(h, read)) == [
        "duplicate", "lost", "moved", "moved", "offset-order", "value-order",
    ]  # fmt: skip


def test_a_write_acknowledged_without_an_offset_is_checked_by_partition():
    # librdkafka's implicit acknowledgement: persisted, offset unknown (None).
    h = sends((0, 0, 0), (1, 0, None), (2, 1, None))
    assert kinds(producer_anomalies(h, {0: [(0, 0), (1, 1), (2, 2)], 1: []})) == ["moved"]


def test_unacknowledged_writes_may_be_missing():
    h = sends((0, 0, 0))
    h.invoke("send", "p", 1)
    h.info("send", "p", (1, "_MSG_TIMED_OUT"))
    assert producer_anomalies(h, {0: [(0, 0)]}) == []


def test_two_owners_in_one_generation_and_commits_going_back_are_found():
    h = History()
    h.ok("assign", "a", (3, "a", [0, 1]))
    h.ok("assign", "b", (3, "b", [1, 2]))
    h.ok("assign", "b", (4, "b", [0, 1, 2]))
    h.ok("commit", "a", ("a", 3, {0: 10}))
    h.ok("commit", "b", ("b", 4, {0: 7}))
    found = group_anomalies(h, {0: 10})
    assert kinds(found) == ["commit-backwards", "double-ownership"]
    assert "p1 in generation 3" in str(found[0]) or "p1 in generation 3" in str(found[1])
    assert kinds(group_anomalies(h, {0: 5})) == [
        "commit-backwards", "commit-lost", "double-ownership",
    ]  # fmt: skip


def test_registry_ids_given_twice_are_found():
    h = History()
    h.ok("register", "c", ("s", "A", 1))
    h.ok("register", "c", ("s", "B", 1))  # id 1 for two schemas
    h.ok("register", "c", ("t", "C", 3))  # acknowledged, not visible
    view = {("s", 1): (1, "A"), ("s", 2): (2, "A")}  # A twice in s
    found = registry_anomalies(h, {"x": view, "y": {("s", 1): (1, "A")}})
    assert kinds(found) == [  # B and C acknowledged, neither visible
        "divergent", "id-reused", "lost-registration", "lost-registration", "two-ids",
    ]  # fmt: skip
    assert registry_anomalies(History(), {"x": view, "y": view}) != []  # still two ids
    clean = {("s", 1): (1, "A")}
    assert registry_anomalies(History(), {"x": clean, "y": clean}) == []


def copied(h, txn, kind, *values):
    """A transaction of the copier; `values`: (partition, number)."""
    h.invoke("txn", "copier", txn)
    h.add(kind, "txn", "copier", (txn, list(values)))
    return h


def test_a_clean_transactional_history_has_no_anomaly():
    """Txn 0 aborted, its input copied again by txn 1; txn 2's outcome unknown (visible)."""
    h = sends((0, 0, 0), (1, 1, 0), (2, 0, 1))
    copied(h, 0, "fail", (0, 0), (1, 1))
    copied(h, 1, "ok", (0, 0), (1, 1))
    copied(h, 2, "info", (0, 2))
    read = {0: [(1, (0, 1)), (4, (2, 2))], 1: [(1, (1, 1))]}
    assert transaction_anomalies(h, read) == []


def test_exactly_once_violations_are_found():
    h = sends((0, 0, 0), (1, 1, 0), (2, 0, 1), (3, 1, 1))
    copied(h, 0, "fail", (0, 0))
    copied(h, 1, "ok", (0, 0), (1, 1), (0, 2))
    copied(h, 2, "ok", (1, 1))
    # 0 seen from the aborted txn 0 and again from txn 1; 1 copied twice; 2's output
    # missing though txn 1 committed; 3 never copied; 9 written by no transaction.
    read = {0: [(0, (0, 0)), (2, (0, 1)), (3, (9, 7))], 1: [(1, (1, 1)), (3, (1, 2))]}
    assert kinds(transaction_anomalies(h, read)) == [
        "aborted-read", "committed-lost", "duplicate", "duplicate", "lost", "lost",
        "phantom", "value-order", "value-order",
    ]  # fmt: skip


def test_beyond_fifty_anomalies_the_rest_are_counted():
    h = sends(*((n, 0, n) for n in range(60)))
    found = producer_anomalies(h, {0: []})
    assert len(found) == 51 and found[-1].detail == "10 not listed: 10 lost"
    assert total(found) == 60
