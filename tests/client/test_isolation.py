"""read_committed filtering over crafted fetch answers (broker/client/isolation.py): no
broker, batches built with broker/records, the `aborted_transactions` list as a leader
sends it."""

from __future__ import annotations

import pytest

from broker.client.isolation import (
    READ_COMMITTED,
    READ_UNCOMMITTED,
    isolation_level,
    visible_records,
)
from broker.client.simple_consumer import FetchResult
from broker.records.batch import build_batch
from broker.records.control import build_marker
from broker.records.header import set_base_offset

P1, P2, IDEMPOTENT = 7, 8, 9


def data(offset: int, *values: bytes, pid: int = -1, transactional: bool = True) -> bytes:
    return build_batch(
        [(None, v, 1000, ()) for v in values],
        base_offset=offset,
        producer_id=pid,
        producer_epoch=0 if pid >= 0 else -1,
        base_sequence=0 if pid >= 0 else -1,
        transactional=transactional and pid >= 0,
    )


def marker(offset: int, pid: int, commit: bool) -> bytes:
    batch = bytearray(build_marker(pid, 0, commit, coordinator_epoch=3, timestamp_ms=1000))
    set_base_offset(batch, 0, offset)
    return bytes(batch)


# P1's first transaction aborted, P2's interleaved one committed, P1's second committed.
LOG = b"".join(
    [
        data(0, b"p1-a", b"p1-b", pid=P1),
        data(2, b"p2-a", pid=P2),
        marker(3, P1, commit=False),
        data(4, b"plain"),
        marker(5, P2, commit=True),
        data(6, b"p1-c", pid=P1),
        data(7, b"idem", pid=IDEMPOTENT, transactional=False),
        marker(8, P1, commit=True),
    ]
)
ABORTED = [(P1, 0)]


def values(level: int, start: int = 0, aborted=ABORTED, buf: bytes = LOG) -> list[bytes]:
    return [bytes(r.value) for r in visible_records(buf, start, level, aborted)]


def test_read_committed_skips_aborted_transactions_and_markers():
    assert values(READ_COMMITTED) == [b"p2-a", b"plain", b"p1-c", b"idem"]


def test_read_uncommitted_skips_only_markers():
    assert values(READ_UNCOMMITTED) == [b"p1-a", b"p1-b", b"p2-a", b"plain", b"p1-c", b"idem"]


def test_from_the_middle_of_the_range():
    assert values(READ_COMMITTED, start=1) == [b"p2-a", b"plain", b"p1-c", b"idem"]
    assert values(READ_COMMITTED, start=5) == [b"p1-c", b"idem"]


def test_an_aborted_transaction_starts_where_the_list_says():
    # P1's first transaction committed, its second (from offset 6) aborted.
    buf = b"".join(
        [
            data(0, b"p1-a", pid=P1),
            marker(1, P1, commit=True),
            data(2, b"p1-b", pid=P1),
            data(3, b"plain"),
            marker(4, P1, commit=False),
        ]
    )
    assert values(READ_COMMITTED, aborted=[(P1, 2)], buf=buf) == [b"p1-a", b"plain"]
    assert values(READ_COMMITTED, aborted=None, buf=buf) == [b"p1-a", b"p1-b", b"plain"]


def test_an_abort_marker_ends_the_aborted_transaction_only():
    # Two aborted transactions of P1 in one answer; the data between them committed.
    buf = b"".join(
        [
            data(0, b"x", pid=P1),
            marker(1, P1, commit=False),
            data(2, b"kept", pid=P1),
            marker(3, P1, commit=True),
            data(4, b"y", pid=P1),
            marker(5, P1, commit=False),
        ]
    )
    assert values(READ_COMMITTED, aborted=[(P1, 4), (P1, 0)], buf=buf) == [b"kept"]


def test_a_partial_last_batch_is_left_for_the_next_fetch():
    assert values(READ_COMMITTED, buf=LOG[:-5]) == [b"p2-a", b"plain", b"p1-c", b"idem"]


def test_fetch_results_filter_at_their_level():
    def result(level: int) -> FetchResult:
        return FetchResult(
            "t", 0, 0, records_bytes=LOG, isolation_level=level, aborted_transactions=ABORTED
        )

    assert [r.offset for r in result(READ_COMMITTED).records()] == [2, 4, 6, 7]
    assert [r.offset for r in result(READ_UNCOMMITTED).records()] == [0, 1, 2, 4, 6, 7]
    assert result(READ_COMMITTED).next_offset == 9  # past the last marker


def test_isolation_level_names():
    assert isolation_level("read_committed") == READ_COMMITTED
    assert isolation_level("read_uncommitted") == READ_UNCOMMITTED
    with pytest.raises(ValueError, match="'committed' for configuration isolation.level"):
        isolation_level("committed")
