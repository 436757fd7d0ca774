"""LogManager: log dirs, start-up recovery from checkpoints, background duties."""

from __future__ import annotations

import dataclasses
import os

from broker.log import LogConfig, LogManager
from broker.log.checkpoint import read_checkpoint
from tests.helpers.clock import Clock
from tests.helpers.log_batches import append, batch, batch_offsets, data_of


def manager(dirs, clock=None, **config) -> LogManager:
    m = LogManager(dirs, LogConfig(**config), now_ms=clock or Clock())
    m.load()
    return m


def test_load_finds_topics_with_dashes_and_skips_strangers(tmp_path):
    m = manager([tmp_path])
    append(m.create("my-dashed-topic", 12), batch(3))
    append(m.create("plain", 0), batch(1))
    m.close()
    (tmp_path / "not a partition").mkdir()
    (tmp_path / "old-0.0123abcd-delete").mkdir()
    again = manager([tmp_path])
    assert sorted((log.topic, log.partition) for log in again.logs()) == [
        ("my-dashed-topic", 12),
        ("plain", 0),
    ]
    assert again.get("my-dashed-topic", 12).log_end_offset == 3
    assert again.get("my-dashed-topic", 1) is None
    assert not (tmp_path / "old-0.0123abcd-delete").exists()


def test_create_spreads_partitions_over_log_dirs(tmp_path):
    dirs = [tmp_path / "a", tmp_path / "b", tmp_path / "c"]
    m = manager(dirs)
    for p in range(6):
        m.create("t", p)
    assert [sorted(n for n in os.listdir(d) if (d / n).is_dir()) for d in dirs] == [
        ["t-0", "t-3"],
        ["t-1", "t-4"],
        ["t-2", "t-5"],
    ]
    assert m.create("t", 0) is m.get("t", 0)


def test_checkpoints_carry_recovery_points_start_offsets_and_high_watermarks(tmp_path):
    m = manager([tmp_path])
    log = m.create("t", 0)
    append(log, batch(5))
    m.checkpoint({("t", 0): 3})
    assert read_checkpoint(tmp_path / "recovery-point-offset-checkpoint") == {("t", 0): 0}
    assert read_checkpoint(tmp_path / "replication-offset-checkpoint") == {("t", 0): 3}
    assert read_checkpoint(tmp_path / "log-start-offset-checkpoint") == {("t", 0): 0}
    m.close({("t", 0): 5})
    assert read_checkpoint(tmp_path / "recovery-point-offset-checkpoint") == {("t", 0): 5}
    again = manager([tmp_path])
    assert again.high_watermarks() == {("t", 0): 5}
    assert again.get("t", 0).recovery_point == 5


def test_an_unclean_stop_recovers_from_the_checkpointed_point(tmp_path):
    m = manager([tmp_path])
    log = m.create("t", 0)
    append(log, batch(5))
    log.flush()
    m.checkpoint()
    append(log, batch(5))
    with open(log.active_segment.log_path, "ab") as f:
        f.write(b"\x00" * 100)  # a torn tail; no close: the process "dies"
    again = manager([tmp_path])
    assert again.get("t", 0).log_end_offset == 10
    assert batch_offsets(data_of(again.get("t", 0).read(0, 1 << 20))) == [(0, 4), (5, 9)]


def test_tick_flushes_by_time(tmp_path):
    clock = Clock()
    m = manager([tmp_path], clock, flush_interval_ms=1000)
    log = m.create("t", 0)
    append(log, batch(2))
    m.tick(clock.now + 999)
    assert log.recovery_point == 0
    clock.now += 1000
    m.tick(clock.now)
    assert log.recovery_point == 2


def test_tick_flushes_rolled_segments(tmp_path):
    m = manager([tmp_path], segment_bytes=200)
    log = m.create("t", 0)
    for _ in range(5):
        append(log, batch(2))
    assert log.has_unflushed_sealed_segments
    m.tick()
    assert log.recovery_point == log.active_segment.base_offset


def test_tick_looks_only_at_logs_with_work(tmp_path):
    """An idle broker's tick costs nothing per partition (issue 23: 10,000 idle
    partitions were walked every second): a log is looked at after a roll, a scheduled
    deletion or an append under a finite flush.ms, until that work is done."""
    clock = Clock()
    m = manager([tmp_path], clock, segment_bytes=200, file_delete_delay_ms=50)
    logs = [m.create("t", p) for p in range(50)]
    for log in logs:
        append(log, batch(1))
    m.tick(clock.now)  # the first tick looks once at every log it took on
    assert m.due_logs == 0
    for _ in range(3):
        append(logs[7], batch(2))  # rolls
    assert m.due_logs == 1
    m.tick(clock.now)
    assert logs[7].recovery_point == logs[7].active_segment.base_offset
    assert m.due_logs == 0
    logs[7].truncate_to(1)  # deletes segments after a delay
    assert m.due_logs == 1
    m.tick(clock.now + 50)
    assert m.due_logs == 0 and not any(n.endswith(".deleted") for n in os.listdir(logs[7].dir))
    timed = dataclasses.replace(m.default_config, flush_interval_ms=1000)
    m.set_topic_config("t", timed)
    assert m.due_logs == 50  # a new flush.ms may make unflushed data due
    m.tick(clock.now + 1000)
    assert m.due_logs == 0 and all(log.recovery_point == log.log_end_offset for log in logs)
    append(logs[3], batch(1))
    assert m.due_logs == 1


def test_tick_applies_retention_when_due_and_finishes_deletions(tmp_path):
    clock = Clock(100_000)
    m = LogManager(
        [tmp_path],
        LogConfig(segment_bytes=200, retention_ms=1000, file_delete_delay_ms=50),
        now_ms=clock,
        retention_check_interval_ms=10_000,
    )
    m.load()
    log = m.create("t", 0)
    for _ in range(4):
        append(log, batch(2, timestamp=1))
    m.tick(clock.now + 9_999)
    assert log.log_start_offset == 0
    m.tick(clock.now + 10_000)
    assert log.log_start_offset == 8
    assert any(n.endswith(".deleted") for n in os.listdir(log.dir))
    m.tick(clock.now + 10_050)
    assert not any(n.endswith(".deleted") for n in os.listdir(log.dir))


def test_delete_topic_and_per_topic_config(tmp_path):
    clock = Clock()
    m = manager([tmp_path], clock, file_delete_delay_ms=100)
    special = dataclasses.replace(m.default_config, segment_bytes=1024)
    m.create("a-b", 0, special)
    m.create("a-b", 1)
    m.create("a", 0)
    assert m.get("a-b", 1).config == special
    assert m.get("a", 0).config == m.default_config
    tighter = dataclasses.replace(m.default_config, segment_bytes=2048)
    m.set_topic_config("a-b", tighter)
    assert m.get("a-b", 0).config == tighter
    assert m.delete_topic("a-b") == 2
    assert m.get("a-b", 0) is None and m.get("a", 0) is not None
    assert sorted(n for n in os.listdir(tmp_path) if not n.endswith("checkpoint"))[0] == "a-0"
    assert any(n.endswith("-delete") for n in os.listdir(tmp_path))
    m.tick(clock.now + 100)
    assert sorted(n for n in os.listdir(tmp_path) if not n.endswith("checkpoint")) == ["a-0"]
    # A new topic of the same name starts empty, with the default config.
    assert m.create("a-b", 0).log_end_offset == 0
    assert m.get("a-b", 0).config == m.default_config
