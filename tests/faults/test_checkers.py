"""The checkers on hand-made histories: each anomaly they exist for is found, and a clean
history has none."""

from __future__ import annotations

from tests.faults.checkers import (
    group_anomalies,
    hourly_anomalies,
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


def hourly(loads, audit=(("2026-11-28 12h", True, []),), unknown=()):
    """A history of the hourly load: records 0-3 acknowledged at p(n % 2) in hour "h(n % 3)",
    `unknown` sends timed out, the given committed loads, the given audit verdict."""
    h = History()
    for n in range(4):
        h.invoke("send", "producer", n)
        h.ok("send", "producer", (n, n % 2, n // 2, f"h{n % 3}"))
    for n in unknown:
        h.invoke("send", "producer", n)
        h.info("send", "producer", (n, "timed out"))
    h.invoke("load", "loader")
    h.info("load", "loader", "a load failed under the fault: counts for nothing")
    for run, ranges in loads:
        h.invoke("load", "loader")
        h.ok("load", "loader", (run, ranges))
    h.invoke("audit", "auditor")
    h.ok("audit", "auditor", list(audit))
    return h


ROWS = [(n, n % 2, n // 2, f"h{n % 3}") for n in range(4)]
LEDGERS = [("r1", "load", {0: (0, 1), 1: (0, 1)}), ("r2", "load", {0: (1, 2), 1: (1, 2)})]


def test_a_clean_hourly_load_has_no_anomaly():
    h = hourly([(run, ranges) for run, _, ranges in LEDGERS])
    assert hourly_anomalies(h, ROWS, LEDGERS) == []


def test_hourly_records_lost_twice_moved_misfiled_or_never_sent_are_found():
    h = hourly([(run, ranges) for run, _, ranges in LEDGERS])
    rows = [ROWS[0], ROWS[0], (2, 1, 5, "h2"), (3, 1, 1, "h1"), (9, 0, 3, "h0")]
    assert kinds(hourly_anomalies(h, rows, LEDGERS)) == [
        "duplicate", "lost", "moved", "phantom", "wrong-hour",
    ]  # fmt: skip


def test_hourly_offsets_going_back_or_skipping_and_loads_not_committed_are_found():
    ledgers = [
        ("r1", "load", {0: (0, 2), 1: (0, 1)}),
        ("r2", "load", {0: (1, 2), 1: (2, 2)}),  # p0 again from 1, p1 skips offset 1
        ("r3", "load", {0: (2, 1), 1: (2, 2)}),  # ends before it starts
    ]
    loads = [(run, ranges) for run, _, ranges in ledgers] + [("r4", {0: (2, 2), 1: (2, 2)})]
    assert kinds(hourly_anomalies(hourly(loads), ROWS, ledgers)) == [
        "load-not-committed", "offsets-backwards", "offsets-backwards", "offsets-skipped",
    ]  # fmt: skip


def test_an_incomplete_audit_is_an_anomaly_unless_unknown_sends_explain_it():
    over = ("2026-11-28 12h", False, ["window 12:00: 1 more than produced"])
    short = ("2026-11-28 13h", False, ["window 13:00: 3/4"])
    loads = [(run, ranges) for run, _, ranges in LEDGERS]
    assert kinds(hourly_anomalies(hourly(loads, [over, short]), ROWS, LEDGERS)) == ["audit"] * 2
    # A send that timed out may have been written and loaded, but was never counted.
    found = hourly_anomalies(hourly(loads, [over, short], unknown=[4]), ROWS, LEDGERS)
    assert [a.detail for a in found] == ["2026-11-28 13h incomplete: window 13:00: 3/4"]
    no_verdict = hourly(loads, [])
    no_verdict.ops.pop()
    assert kinds(hourly_anomalies(no_verdict, ROWS, LEDGERS)) == ["audit"]
