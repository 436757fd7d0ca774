"""One partition's replication state, no I/O: leader and follower roles, the high
watermark over the ISR, ISR expansion and shrink, follower appends and truncation."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from broker.log.config import LogConfig
from broker.log.log import Log
from broker.protocol.errors import ErrorCode
from broker.records.batch import build_batch, iter_records
from broker.records.validate import validate_produce_records
from broker.server.partition import Leadership, Partition


@pytest.fixture
def log(tmp_path):
    opened = Log.open(tmp_path / "t-0", "t", 0, LogConfig(min_insync_replicas=2))
    yield opened
    opened.close()


def _append(partition: Partition, *values: bytes, acks: int = -1, seq: int = -1, pid: int = -1):
    raw = bytearray(
        build_batch(
            [(None, v, 1_000, []) for v in values],
            producer_id=pid,
            producer_epoch=0 if pid >= 0 else -1,
            base_sequence=seq,
        )
    )
    return partition.append_as_leader(raw, validate_produce_records(bytes(raw), 1 << 20), 0, acks)


def _leader(log, isr=(0, 1, 2), replicas=(0, 1, 2), epoch=1, now=0) -> Partition:
    p = Partition(log, broker_id=0)
    p.make_leader(Leadership(0, epoch, isr, replicas), now)
    return p


def test_a_replica_without_leadership_refuses_appends(log):
    p = Partition(log, broker_id=0)
    assert not p.is_leader
    assert _append(p, b"a").error == ErrorCode.NOT_LEADER_OR_FOLLOWER
    p.make_follower(Leadership(1, 1, (0, 1), (0, 1)))
    assert _append(p, b"a").error == ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_high_watermark_is_the_smallest_log_end_over_the_isr(log):
    p = _leader(log)
    assert _append(p, b"a", b"b", b"c").next_offset == 3
    assert p.high_watermark == 0  # followers have nothing yet
    p.record_follower_fetch(1, 2, now_ms=10)
    assert p.high_watermark == 0
    p.record_follower_fetch(2, 3, now_ms=10)
    assert p.high_watermark == 2
    p.record_follower_fetch(1, 3, now_ms=11)
    assert p.high_watermark == 3
    p.record_follower_fetch(1, 1, now_ms=12)  # never backwards
    assert p.high_watermark == 3


def test_min_insync_replicas_refuses_acks_all_before_appending(log):
    p = _leader(log, isr=(0,))
    refused = _append(p, b"a")
    assert refused.error == ErrorCode.NOT_ENOUGH_REPLICAS and log.log_end_offset == 0
    assert _append(p, b"a", acks=1).error == ErrorCode.NONE
    assert p.high_watermark == 1  # alone in its ISR: everything is committed


def test_isr_expands_once_a_follower_reaches_the_high_watermark_and_the_epoch(log):
    p = _leader(log, isr=(0, 1))
    _append(p, b"a", b"b")
    p.record_follower_fetch(1, 2, now_ms=5)
    assert p.high_watermark == 2
    p.record_follower_fetch(2, 1, now_ms=5)  # behind the high watermark
    assert p.isr_expansion() is None
    p.record_follower_fetch(2, 2, now_ms=6)
    assert p.isr_expansion() == (0, 1, 2)
    p.propose_isr((0, 1, 2))
    assert p.isr_expansion() is None  # one change at a time
    _append(p, b"c")
    p.record_follower_fetch(1, 3, now_ms=7)
    assert p.high_watermark == 2  # the pending member counts already
    p.apply_isr((0, 1, 2), zk_version=4)
    assert (p.isr, p.zk_version, p.pending_isr) == ((0, 1, 2), 4, None)
    p.record_follower_fetch(2, 3, now_ms=8)
    assert p.high_watermark == 3


def test_isr_shrinks_by_time_since_a_follower_last_caught_up(log):
    p = _leader(log, now=0)
    _append(p, b"a")
    assert p.isr_shrink(now_ms=1_000, max_lag_ms=1_000) is None  # both caught up at 0
    p.record_follower_fetch(1, 1, now_ms=900)  # at the log end: caught up at 900
    p.record_follower_fetch(2, 0, now_ms=900)  # still behind
    assert p.isr_shrink(now_ms=1_500, max_lag_ms=1_000) == (0, 1)
    # A follower that reaches the log end it saw at its previous fetch was caught up then.
    p.record_follower_fetch(2, 1, now_ms=1_600)
    assert p.isr_shrink(now_ms=1_700, max_lag_ms=1_000) is None


def test_a_caught_up_follower_in_a_fetch_session_stays_in_sync_while_it_fetches(log):
    """An incremental fetch leaves out a partition whose offset did not change: the
    follower's session's last fetch counts for every partition it has caught up on."""
    p = _leader(log, now=0)
    _append(p, b"a")
    session = SimpleNamespace(last_used_ms=900)
    p.record_follower_fetch(1, 1, now_ms=900, session=session)  # caught up
    p.record_follower_fetch(2, 0, now_ms=900, session=session)  # behind
    session.last_used_ms = 5_000  # fetching on, never naming the partition again
    assert p.isr_shrink(now_ms=5_100, max_lag_ms=1_000) == (0, 1)
    _append(p, b"b")  # now follower 1 is behind too: its last fetch no longer counts
    assert p.isr_shrink(now_ms=5_100, max_lag_ms=1_000) == (0,)


def test_a_new_epoch_resets_follower_knowledge(log):
    p = _leader(log, epoch=1)
    _append(p, b"a")
    p.record_follower_fetch(1, 1, now_ms=1)
    p.make_leader(Leadership(0, 2, (0, 1, 2), (0, 1, 2)), now_ms=2)
    assert p.leader_epoch_start_offset == 1
    assert p.followers[1].log_end_offset == -1


def test_follower_appends_whole_batches_and_takes_the_leaders_high_watermark(tmp_path, log):
    leader_log = Log.open(tmp_path / "leader" / "t-0", "t", 0, LogConfig())
    leader = Partition(leader_log, broker_id=1)
    leader.make_leader(Leadership(1, 1, (1,), (0, 1)), 0)
    _append(leader, b"a", b"b", acks=1, pid=7, seq=0)
    _append(leader, b"c", acks=1, pid=7, seq=2)
    fetched = b"".join(r.read() for r in leader_log.read(0, 1 << 20).regions)

    follower = Partition(log, broker_id=0)
    follower.make_follower(Leadership(1, 1, (1,), (0, 1)))
    assert follower.append_as_follower(fetched + fetched[:20], now_ms=0) == len(fetched)
    assert log.log_end_offset == 3
    assert follower.append_as_follower(fetched, now_ms=0) == 0  # already there
    assert follower.follower_high_watermark(10) and follower.high_watermark == 3
    records = [
        r.value for r in iter_records(b"".join(x.read() for x in log.read(0, 1 << 20).regions))
    ]
    assert records == [b"a", b"b", b"c"]
    # The follower knows the producer's sequences: as a new leader it dedupes a retry.
    follower.make_leader(Leadership(0, 2, (0,), (0, 1)), 0)
    retry = _append(follower, b"c", acks=1, pid=7, seq=2)
    assert (retry.error, retry.base_offset, log.log_end_offset) == (ErrorCode.NONE, 2, 3)
    leader_log.close()


def test_follower_refuses_a_corrupt_batch_and_truncates(log):
    raw = bytearray(build_batch([(None, b"x", 1, [])]))
    raw[-1] ^= 0xFF
    p = Partition(log, broker_id=0)
    p.make_follower(Leadership(1, 1, (1,), (0, 1)))
    with pytest.raises(ValueError, match="CRC"):
        p.append_as_follower(bytes(raw), now_ms=0)
    good = build_batch([(None, b"x", 1, []), (None, b"y", 1, [])])
    p.append_as_follower(good, now_ms=0)
    p.follower_high_watermark(2)
    p.truncate_to(0)
    assert (log.log_end_offset, p.high_watermark) == (0, 0)
