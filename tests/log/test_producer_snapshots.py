"""Producer-state snapshots (docs/contracts/log.md, "Producer-state snapshots"): the
file format, and a partition's producer state coming back from a snapshot plus the log
after it, without processes. A "crash" is a second Log opened on the same directory
without closing the first (the data is in the page cache, no clean-stop snapshot)."""

from __future__ import annotations

import pytest

from broker.log.config import LogConfig
from broker.log.log import Log
from broker.log.producer_snapshots import KEEP_SNAPSHOTS, snapshot_name, snapshot_offsets
from broker.protocol.errors import ErrorCode
from broker.records.batch import build_batch
from broker.records.control import build_marker
from broker.records.header import parse_header
from broker.server.partition import Leadership, Partition
from broker.server.producer_state import (
    BatchMetadata,
    CorruptSnapshot,
    ProducerEntry,
    ProducerStateTable,
    decode_snapshot,
    encode_snapshot,
)

# Segments of a few batches each, so a handful of appends rolls (and snapshots) several.
CONFIG = LogConfig(segment_bytes=400)


def _open(path, config=CONFIG, recovery_point=0) -> Partition:
    log = Log.open(path, "t", 0, config, recovery_point=recovery_point)
    partition = Partition(log, broker_id=0)
    partition.make_leader(Leadership(0, 1, (0,), (0,)), now_ms=0)
    return partition


def _append(partition: Partition, pid=-1, seq=-1, txn=False, value=b"x" * 60):
    data = build_batch(
        [(None, value, 1, [])],
        producer_id=pid,
        producer_epoch=0 if pid >= 0 else -1,
        base_sequence=seq,
        transactional=txn,
    )
    buf = bytearray(data)
    return partition.append_as_leader(buf, [(0, parse_header(buf))], now_ms=1)


def _filler(partition: Partition, count: int) -> None:
    for _ in range(count):
        assert _append(partition).error == ErrorCode.NONE


def _crash_and_open(partition: Partition, config=CONFIG) -> Partition:
    """The broker's duties flushed the rolled segments (the recovery point moved to the
    active segment), then the process died: no clean-stop snapshot."""
    partition.log.flush(partition.log.active_segment.base_offset)
    return _open(partition.log.dir, config, partition.log.recovery_point)


def test_a_snapshot_round_trips_every_field():
    table = ProducerStateTable()
    entry = ProducerEntry(3, last_seen_ms=1234, coordinator_epoch=9)
    entry.last_marker_offset = 40
    entry.batches.extend(BatchMetadata(i, i, 50 + i, 50 + i, 99 + i) for i in range(3))
    table.producers[7] = entry
    table.producers[2**40] = ProducerEntry(0)
    table.ongoing[7] = 51
    back = decode_snapshot(encode_snapshot(table))
    assert back.producers == table.producers
    assert back.ongoing == {7: 51}
    assert decode_snapshot(encode_snapshot(ProducerStateTable())).producers == {}


@pytest.mark.parametrize(
    "damage",
    [
        lambda b: b[:-1],  # torn
        lambda b: b[:10] + bytes([b[10] ^ 1]) + b[11:],  # a flipped bit
        lambda b: b"\x00\x02" + b[2:],  # another version
        lambda b: b"",  # a file that never got its data (power loss, no fsync)
        lambda b: b + b"\x00",  # stray bytes
    ],
)
def test_a_damaged_snapshot_is_refused(damage):
    table = ProducerStateTable()
    table.producers[1] = ProducerEntry(0)
    table.producers[1].batches.append(BatchMetadata(0, 0, 0, 0, 0))
    with pytest.raises(CorruptSnapshot):
        decode_snapshot(damage(encode_snapshot(table)))


def test_an_idempotent_producer_known_only_from_a_snapshot_is_still_deduplicated(tmp_path):
    """Producer 7's batch is in a segment retention deleted: after a crash its sequence
    comes from the snapshot alone, and its retry is answered with the original offset."""
    path = tmp_path / "t-0"
    p = _open(path)
    first = _append(p, pid=7, seq=0)
    assert first.error == ErrorCode.NONE
    _filler(p, 12)  # several rolls, each writing a snapshot
    p.log.config = LogConfig(segment_bytes=400, retention_bytes=0)
    assert p.log.delete_expired(now_ms=1) > 0
    assert p.log.log_start_offset > first.base_offset  # its batch is gone from the log
    assert min(snapshot_offsets(path)) >= p.log.log_start_offset  # older ones went too

    again = _crash_and_open(p)
    retry = _append(again, pid=7, seq=0)
    assert (retry.error, retry.base_offset) == (ErrorCode.NONE, first.base_offset)
    assert _append(again, pid=7, seq=5).error == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert _append(again, pid=7, seq=1).error == ErrorCode.NONE


def test_an_old_open_transaction_keeps_the_lso_and_only_the_tail_is_read(tmp_path, monkeypatch):
    path = tmp_path / "t-0"
    p = _open(path)
    assert _append(p, pid=9, seq=0, txn=True).base_offset == 0
    _filler(p, 12)
    assert p.last_stable_offset == 0
    newest = max(snapshot_offsets(path))
    assert 0 < newest < p.log.log_end_offset  # the last few batches are after it

    replayed_from = []
    real = Log.batches_from
    monkeypatch.setattr(
        Log,
        "batches_from",
        lambda log, offset: (replayed_from.append(offset), real(log, offset))[1],
    )
    again = _crash_and_open(p)
    assert replayed_from == [newest]
    assert again.last_stable_offset == 0
    # Its ABORT (coordinator epoch 2) then closes it and lands in the aborted index.
    marker = bytearray(build_marker(9, 0, False, 2, 1))
    assert again.append_as_leader(marker, [(0, parse_header(marker))], now_ms=1).error == 0
    assert again.last_stable_offset == again.high_watermark == again.log.log_end_offset
    assert [(e.producer_id, e.first_offset) for e in again.log.aborted_transactions(0, 99)] == [
        (9, 0)
    ]


def test_a_clean_stop_snapshots_the_log_end_and_a_start_replays_nothing(tmp_path, monkeypatch):
    path = tmp_path / "t-0"
    p = _open(path, LogConfig())
    _append(p, pid=3, seq=0)
    p.log.close()
    assert snapshot_offsets(path) == [1]
    replayed = []
    real = Log.batches_from
    monkeypatch.setattr(
        Log, "batches_from", lambda log, offset: (replayed.append(offset), real(log, offset))[1]
    )
    again = _open(path, LogConfig(), recovery_point=1)
    assert replayed == [1]
    assert again.producers.producers[3].last_seq == 0
    again.log.close()


def test_corrupt_snapshots_fall_back_to_older_ones_then_to_the_log_start(tmp_path):
    path = tmp_path / "t-0"
    p = _open(path)
    first = _append(p, pid=7, seq=0)
    _filler(p, 12)
    offsets = snapshot_offsets(path)
    assert len(offsets) == KEEP_SNAPSHOTS  # older ones pruned at each roll
    (path / snapshot_name(offsets[-1])).write_bytes(b"garbage")
    again = _crash_and_open(p)
    assert snapshot_offsets(path) == offsets[:-1]  # the corrupt one is deleted
    assert again.producers.producers[7].last_seq == 0

    for offset in offsets[:-1]:
        (path / snapshot_name(offset)).write_bytes(b"")
    third = _crash_and_open(again)  # no readable snapshot: the whole log is read
    assert snapshot_offsets(path) == []
    retry = _append(third, pid=7, seq=0)
    assert (retry.error, retry.base_offset) == (ErrorCode.NONE, first.base_offset)


def test_truncation_drops_snapshots_above_the_new_log_end(tmp_path):
    path = tmp_path / "t-0"
    p = _open(path)
    _append(p, pid=7, seq=0)
    _filler(p, 12)
    offsets = snapshot_offsets(path)
    p.truncate_to(offsets[0])
    assert snapshot_offsets(path) == [offsets[0]]
    assert p.producers.producers[7].last_seq == 0  # reloaded from what is left
    p.log.truncate_fully_and_start_at(100)
    assert snapshot_offsets(path) == []


def test_a_broker_stop_writes_the_snapshot_its_restart_loads(tmp_path, monkeypatch):
    """The broker's own stop path (flush, checkpoint, close) leaves a snapshot at the log
    end and a recovery point there, so the restart replays nothing and still knows the
    idempotent producer."""
    from tests.helpers.inprocess_broker import InProcessBroker
    from tests.helpers.server_requests import create, produce, values

    broker = InProcessBroker(tmp_path / "logs")
    create(broker, "t")
    idempotent = {"producer_id": 5, "producer_epoch": 0, "base_sequence": 0}
    assert produce(broker, "t", values(b"a", b"b", **idempotent))["base_offset"] == 0
    broker.close()
    assert snapshot_offsets(tmp_path / "logs" / "t-0") == [2]
    replayed = []
    real = Log.batches_from
    monkeypatch.setattr(
        Log,
        "batches_from",
        lambda log, offset: (replayed.append((log.topic, offset)), real(log, offset))[1],
    )
    broker = InProcessBroker(tmp_path / "logs")
    try:
        assert ("t", 2) in replayed
        retry = produce(broker, "t", values(b"a", b"b", **idempotent))
        assert (retry["error_code"], retry["base_offset"]) == (0, 0)
    finally:
        broker.close()
