"""The log cleaner against a model: random keyed updates, tombstones and keyless records,
cleaned at random moments (with a roomy or a tiny offset map), reopened at random; the
records read back must be exactly those the model keeps, at their original offsets, and
a read from any offset (gaps included) must start at the next survivor."""

from __future__ import annotations

import itertools
import tempfile
from dataclasses import dataclass, field

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.log import LogConfig, LogManager
from broker.log.cleaner import CleanerConfig, LogCleaner
from broker.records.batch import build_batch, iter_records
from broker.records.header import CODEC_LZ4, CODEC_NONE
from tests.helpers.clock import Clock
from tests.helpers.log_batches import append, data_of

RETENTION_MS = 1_000
CONFIG = LogConfig(
    segment_bytes=400,
    index_interval_bytes=128,
    cleanup_policy=("compact",),
    min_cleanable_dirty_ratio=0.0,
    delete_retention_ms=RETENTION_MS,
    file_delete_delay_ms=0,
)

keys = st.one_of(st.none(), st.integers(0, 11).map(lambda i: b"key-%d" % i))
values = st.one_of(st.none(), st.binary(min_size=0, max_size=40))
record = st.tuples(keys, values)
# Each step appends one batch, moves the clock, and may clean and reopen.
steps = st.lists(
    st.tuples(
        st.lists(record, min_size=1, max_size=5),
        st.booleans(),  # compressed
        st.integers(0, 600),  # ms the clock moves
        st.integers(0, 2),  # clean when 0
        st.integers(0, 15),  # reopen when 0
    ),
    min_size=5,
    max_size=70,
)


@dataclass
class Model:
    """Every record ever appended, and which the cleaner may already have removed."""

    records: dict[int, tuple] = field(default_factory=dict)  # offset -> (key, value, ts)
    gone: set[int] = field(default_factory=set)
    horizons: dict[int, int] = field(default_factory=dict)  # tombstone offset -> horizon

    def clean(self, below: int, now: int) -> None:
        """What one cleaning that mapped every key up to `below` keeps (compaction.py)."""
        latest: dict[bytes, int] = {}
        for offset in sorted(o for o in self.records if o < below):
            key = self.records[offset][0]
            if key is not None:
                latest[key] = offset
        for offset in sorted(o for o in self.records if o < below and o not in self.gone):
            key, value, _ = self.records[offset]
            if key is None or offset < latest[key]:
                self.gone.add(offset)
            elif value is None:
                horizon = self.horizons.get(offset)
                if horizon is None:
                    self.horizons[offset] = now + RETENTION_MS
                elif now >= horizon:
                    self.gone.add(offset)

    def survivors(self) -> list[tuple]:
        return [
            (offset, *self.records[offset])
            for offset in sorted(self.records)
            if offset not in self.gone
        ]


def open_manager(path, clock) -> LogManager:
    m = LogManager([path], CONFIG, now_ms=clock)
    m.load()
    return m


def read_all(log, start=0) -> list[tuple]:
    data = data_of(log.read(start, 1 << 30)) if start < log.log_end_offset else b""
    return [(r.offset, r.key, r.value, r.timestamp) for r in iter_records(data, start)]


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(steps=steps, budget=st.sampled_from([1 << 20, 1_400]))
def test_cleaning_keeps_exactly_what_the_model_keeps(tmp_path, steps, budget):
    path = tempfile.mkdtemp(dir=tmp_path)
    clock = Clock()
    manager = open_manager(path, clock)
    log = manager.create("t", 0)
    cleaner = LogCleaner(manager, CleanerConfig(dedupe_buffer_size=budget), now_ms=clock)
    model = Model()
    for recs, compressed, tick, clean, reopen in steps:
        first = log.log_end_offset
        batch = build_batch(
            [(k, v, clock.now, []) for k, v in recs],
            codec=CODEC_LZ4 if compressed else CODEC_NONE,
        )
        append(log, batch)
        for i, (k, v) in enumerate(recs):
            model.records[first + i] = (k, v, clock.now)
        clock.now += tick
        if clean == 0:
            result = cleaner.clean_once()
            if result is not None:
                model.clean(result.map_end, clock.now)
        if reopen == 0:
            manager.close()
            manager = open_manager(path, clock)
            log = manager.get("t", 0)
            cleaner = LogCleaner(manager, CleanerConfig(dedupe_buffer_size=budget), now_ms=clock)
        assert read_all(log) == model.survivors()
    survivors = model.survivors()
    for start in range(log.log_end_offset):
        expected = [r for r in survivors if r[0] >= start]
        assert read_all(log, start) == expected
    manager.close()


def updates(tmp_path, clock, count: int, keys: int):
    """A compacted log of `count` single-record batches cycling over `keys` keys."""
    manager = open_manager(tmp_path, clock)
    log = manager.create("t", 0)
    for i in range(count):
        append(log, build_batch([(b"key-%03d" % (i % keys), b"v%d" % i, clock.now, [])]))
    return manager, log


def test_a_roomy_map_cleans_everything_below_the_active_segment(tmp_path):
    clock = Clock()
    manager, log = updates(tmp_path, clock, 200, 7)
    cleaner = LogCleaner(manager, now_ms=clock)
    result = cleaner.clean_once()
    assert result.map_end == log.active_segment.base_offset
    below = [r for r in read_all(log) if r[0] < result.map_end]
    assert len({r[1] for r in below}) == len(below)  # one record per key
    assert cleaner.clean_once() is None  # nothing dirty left
    assert cleaner.first_dirty_offset("t", 0) == result.map_end
    manager.close()


def test_a_small_map_cleans_a_prefix_and_the_rest_next_time(tmp_path):
    clock = Clock()
    manager, log = updates(tmp_path, clock, 300, 60)
    cleaner = LogCleaner(manager, CleanerConfig(dedupe_buffer_size=2_500), now_ms=clock)
    ends = []
    while (result := cleaner.clean_once()) is not None:
        ends.append(result.map_end)
    assert len(ends) > 2 and ends == sorted(ends)
    assert ends[-1] == log.active_segment.base_offset
    below = [r for r in read_all(log) if r[0] < ends[-1]]
    assert len({r[1] for r in below}) == len(below)
    manager.close()


def test_tombstones_stay_delete_retention_ms_after_the_cleaner_first_saw_them(tmp_path):
    clock = Clock()
    manager = open_manager(tmp_path, clock)
    log = manager.create("t", 0)
    for i in range(40):
        append(log, build_batch([(b"k%d" % (i % 4), b"v", clock.now, [])]))
    for k in range(4):
        append(log, build_batch([(b"k%d" % k, None, clock.now, [])]))
    for _ in range(40):  # pushes the tombstones below the active segment
        append(log, build_batch([(b"other", b"x" * 20, clock.now, [])]))
    cleaner = LogCleaner(manager, now_ms=clock)
    cleaner.clean_once()
    tombstones = [r for r in read_all(log) if r[1] != b"other"]
    assert [(r[1], r[2]) for r in tombstones] == [(b"k%d" % k, None) for k in range(4)]
    clock.now += RETENTION_MS - 1
    assert cleaner.clean_once() is None  # nothing dirty, horizon not reached
    clock.now += 1
    assert cleaner.clean_once() is not None  # due: cleaned although nothing is dirty
    assert [r for r in read_all(log) if r[1] != b"other"] == []
    manager.close()


def test_the_last_batch_of_a_known_producer_keeps_its_header(tmp_path):
    from broker.log.cleaner import PartitionState

    clock = Clock()
    manager = open_manager(tmp_path, clock)
    log = manager.create("t", 0)
    sequence = itertools.count()
    for i in range(3):
        append(
            log,
            build_batch(
                [(b"k", b"old-%d" % i, clock.now, [])],
                producer_id=7,
                producer_epoch=0,
                base_sequence=next(sequence),
            ),
        )
    last_of_producer = log.log_end_offset - 1
    for i in range(60):
        append(log, build_batch([(b"k", b"new-%d" % i, clock.now, [])]))
    state = PartitionState(log.log_end_offset, {7: last_of_producer})
    cleaner = LogCleaner(manager, now_ms=clock, partition_state=lambda _: state)
    cleaner.clean_once()
    from broker.records.batch import iter_batches

    data = data_of(log.read(0, 1 << 30))
    producer_batches = [h for _, h in iter_batches(data) if h.producer_id == 7]
    assert [(h.base_offset, h.records_count, h.base_sequence) for h in producer_batches] == [
        (last_of_producer, 0, 2)
    ]
    manager.close()
