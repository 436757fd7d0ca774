"""Idempotent producer sequences, including after a restart (state rebuilt from the log)."""

from __future__ import annotations

from broker.log.config import LogConfig
from broker.log.log import Log
from broker.protocol.errors import ErrorCode
from broker.records.batch import build_batch
from broker.records.validate import validate_produce_records
from broker.server.partition import Leadership, Partition

PID, EPOCH = 42, 0


def _batch(seq: int, n: int = 3) -> tuple[bytearray, list]:
    raw = bytearray(
        build_batch(
            [(None, b"v%d" % (seq + i), 1_700_000_000_000, []) for i in range(n)],
            producer_id=PID,
            producer_epoch=EPOCH,
            base_sequence=seq,
        )
    )
    return raw, validate_produce_records(bytes(raw), 1 << 20)


def _leader(log: Log) -> Partition:
    partition = Partition(log, broker_id=0)
    partition.make_leader(Leadership(0, 0, (0,), (0,)), now_ms=0)
    return partition


def _append(partition: Partition, seq: int):
    raw, batches = _batch(seq)
    return partition.append_as_leader(raw, batches, now_ms=1_700_000_000_000)


def test_duplicates_gaps_and_a_restart(tmp_path):
    log = Log.open(tmp_path / "t-0", "t", 0, LogConfig())
    partition = _leader(log)
    assert _append(partition, 0).base_offset == 0
    assert _append(partition, 3).base_offset == 3
    retry = _append(partition, 3)  # a retried batch: its original offset, nothing appended
    assert (retry.error, retry.base_offset) == (ErrorCode.NONE, 3)
    assert log.log_end_offset == 6
    assert _append(partition, 9).error == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    log.close()

    # After a restart the table is rebuilt from the log: the retry is still a duplicate.
    log = Log.open(tmp_path / "t-0", "t", 0, LogConfig(), recovery_point=6)
    partition = _leader(log)
    retry = _append(partition, 3)
    assert (retry.error, retry.base_offset) == (ErrorCode.NONE, 3)
    assert log.log_end_offset == 6
    assert _append(partition, 9).error == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert _append(partition, 6).base_offset == 6
    log.close()
