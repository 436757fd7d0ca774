"""LeaderEpochCache on its own: Kafka's rules for assigning, answering OffsetForLeaderEpoch
and truncating, the checkpoint file, and a model check against a log described offset by
offset."""

from __future__ import annotations

import logging

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.log.checkpoint import CorruptCheckpoint
from broker.log.leader_epoch import (
    UNDEFINED_EPOCH,
    UNDEFINED_EPOCH_OFFSET,
    EpochEntry,
    LeaderEpochCache,
)

UNDEFINED = (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)


def cache_of(tmp_path, *entries: tuple[int, int]) -> LeaderEpochCache:
    cache = LeaderEpochCache(tmp_path / "leader-epoch-checkpoint", name="t-0")
    for epoch, start in entries:
        cache.assign(epoch, start)
    cache.write()
    return cache


def saved(cache: LeaderEpochCache) -> list[EpochEntry]:
    """The entries of the file once the pending changes are written."""
    cache.write()
    again = LeaderEpochCache.read(cache.path)
    assert again is not None
    return again.entries


# -- assign -----------------------------------------------------------------------------
def test_assign_records_each_new_epoch_in_kafkas_file_format(tmp_path):
    cache = cache_of(tmp_path)
    assert cache.latest_epoch() == UNDEFINED_EPOCH
    assert not cache.path.exists()  # nothing to save before the first epoch
    assert cache.assign(0, 0)
    assert cache.assign(3, 120)
    assert cache.write()
    assert cache.path.read_text() == "0\n2\n0 0\n3 120\n"
    assert cache.latest_epoch() == 3
    assert cache.earliest_entry() == EpochEntry(0, 0)


def test_the_same_epoch_again_changes_nothing(tmp_path):
    cache = cache_of(tmp_path, (0, 0), (1, 10))
    cache.path.unlink()
    assert not cache.assign(1, 10)
    assert not cache.assign(1, 25)  # later appends of the epoch
    assert not cache.dirty and not cache.write()
    assert not cache.path.exists(), "no rewrite when nothing changed"
    assert cache.entries == [(0, 0), (1, 10)]


def test_an_epoch_starting_lower_than_it_did_moves_its_start(tmp_path):
    cache = cache_of(tmp_path, (0, 0), (1, 10))
    assert cache.assign(1, 7)
    assert cache.entries == saved(cache) == [(0, 0), (1, 7)]


def test_a_new_epoch_starting_below_the_last_entry_replaces_the_entries_it_conflicts_with(
    tmp_path, caplog
):
    cache = cache_of(tmp_path, (0, 0), (2, 10), (3, 20))
    with caplog.at_level(logging.WARNING):
        assert cache.assign(4, 15)
    assert cache.entries == saved(cache) == [(0, 0), (2, 10), (4, 15)]
    assert "conflicting" in caplog.text


def test_an_epoch_that_appended_nothing_gives_way_quietly(tmp_path, caplog):
    cache = cache_of(tmp_path, (0, 0), (5, 10))  # epoch 5 led, appended nothing
    with caplog.at_level(logging.WARNING):
        assert cache.assign(6, 10)
        assert cache.assign(4, 10)  # a lower epoch there: its batches are what the log holds
    assert cache.entries == [(0, 0), (4, 10)]
    assert caplog.text == ""


def test_a_lower_epoch_replaces_the_higher_ones_as_kafka_does(tmp_path):
    cache = cache_of(tmp_path, (0, 0), (5, 10))
    assert cache.assign(3, 30)
    assert cache.entries == saved(cache) == [(0, 0), (3, 30)]


@pytest.mark.parametrize(("epoch", "start"), [(-1, 0), (0, -1)])
def test_negative_entries_are_refused(tmp_path, epoch, start):
    with pytest.raises(ValueError, match="invalid"):
        cache_of(tmp_path).assign(epoch, start)


def test_changes_are_written_once_in_a_batch_and_synced_before_the_recovery_point_moves(
    tmp_path, monkeypatch
):
    """A change marks the cache dirty and tells `on_dirty` once; `write` writes it
    without fsync; `sync` writes what is pending and fsyncs (module doc)."""
    from broker.log import leader_epoch

    synced = []
    monkeypatch.setattr(leader_epoch, "fsync_file", lambda path, *sync: synced.append(path))
    cache = LeaderEpochCache(tmp_path / "leader-epoch-checkpoint", name="t-0")
    told = []
    cache.on_dirty = told.append
    cache.assign(0, 0)
    cache.assign(3, 120)
    cache.truncate_from_start(5)
    assert told == [cache] and cache.dirty and not cache.synced
    assert not cache.path.exists(), "nothing written until the batch"
    assert cache.write() and not cache.write()
    assert saved(cache) == [(0, 5), (3, 120)] and not cache.synced and synced == []
    cache.assign(4, 130)
    assert told == [cache, cache]
    assert cache.sync() and synced == [cache.path]
    assert cache.synced and not cache.dirty and saved(cache) == [(0, 5), (3, 120), (4, 130)]
    assert not cache.sync()


# -- end_offset_for ---------------------------------------------------------------------
@pytest.mark.parametrize(
    ("requested", "answer"),
    [
        (6, (6, 100)),  # the latest epoch: the log end offset
        (2, (2, 40)),  # an older epoch: where the next one starts
        (4, (4, 70)),
        (3, (2, 40)),  # never appended here: the epoch below it, and its end
        (5, (4, 70)),
        (1, (1, 10)),  # below the first entry: the first start (Kafka since KIP-279)
        (0, (0, 10)),
        (7, UNDEFINED),  # above the latest
        (UNDEFINED_EPOCH, UNDEFINED),
    ],
)
def test_end_offset_for(tmp_path, requested, answer):
    cache = cache_of(tmp_path, (2, 10), (4, 40), (6, 70))
    assert cache.end_offset_for(requested, log_end_offset=100) == answer


def test_an_empty_cache_knows_no_epoch(tmp_path):
    cache = cache_of(tmp_path)
    assert [cache.end_offset_for(e, 0) for e in (-1, 0, 3)] == [UNDEFINED] * 3


def test_epoch_for_offset(tmp_path):
    cache = cache_of(tmp_path, (2, 10), (4, 40))
    got = [cache.epoch_for_offset(o) for o in (0, 9, 10, 39, 40, 1000)]
    assert got == [UNDEFINED_EPOCH, UNDEFINED_EPOCH, 2, 2, 4, 4]


# -- truncation -------------------------------------------------------------------------
def test_truncate_from_end_drops_the_epochs_starting_at_or_after_it(tmp_path):
    cache = cache_of(tmp_path, (0, 0), (1, 10), (2, 20))
    cache.truncate_from_end(25)
    assert cache.entries == [(0, 0), (1, 10), (2, 20)]
    cache.truncate_from_end(20)
    assert cache.entries == saved(cache) == [(0, 0), (1, 10)]
    cache.truncate_from_end(0)
    assert cache.entries == saved(cache) == []
    assert cache.latest_epoch() == UNDEFINED_EPOCH


@pytest.mark.parametrize(
    ("start", "entries"),
    [
        (0, [(0, 0), (1, 10), (2, 20)]),  # nothing below the start: unchanged
        (5, [(0, 5), (1, 10), (2, 20)]),
        (10, [(1, 10), (2, 20)]),
        (15, [(1, 15), (2, 20)]),
        (90, [(2, 90)]),  # everything went: the latest epoch stays, at the new start
    ],
)
def test_truncate_from_start_moves_the_first_epoch_to_the_new_log_start(tmp_path, start, entries):
    cache = cache_of(tmp_path, (0, 0), (1, 10), (2, 20))
    cache.truncate_from_start(start)
    assert cache.entries == saved(cache) == entries


def test_truncate_from_start_before_the_first_entry_changes_nothing(tmp_path):
    cache = cache_of(tmp_path, (1, 10))
    cache.path.unlink()
    cache.truncate_from_start(4)
    assert not cache.write()
    assert cache.entries == [(1, 10)] and not cache.path.exists()


# -- the file ---------------------------------------------------------------------------
def test_read_without_a_file_is_none(tmp_path):
    assert LeaderEpochCache.read(tmp_path / "leader-epoch-checkpoint") is None


@pytest.mark.parametrize(
    "text",
    [
        "",
        "1\n0\n",  # unknown version
        "0\n2\n0 0\n",  # count does not match
        "0\n1\n0\n",
        "0\n1\n0 0 0\n",
        "0\n1\nx 0\n",
        "0\n1\n-1 0\n",
        "0\n2\n1 0\n1 5\n",  # epochs must increase
        "0\n2\n1 5\n2 5\n",  # start offsets too
        "\x00\xff\xfe",
    ],
)
def test_a_corrupt_file_is_refused(tmp_path, text):
    path = tmp_path / "leader-epoch-checkpoint"
    path.write_bytes(text.encode("latin-1"))
    with pytest.raises(CorruptCheckpoint, match="leader-epoch-checkpoint"):
        LeaderEpochCache.read(path)


def test_rebuild_assigns_the_batches_epochs_and_saves_them(tmp_path):
    batches = [(-1, 0), (0, 3), (0, 5), (2, 9), (2, 12), (3, 20)]
    cache = LeaderEpochCache.rebuild(tmp_path / "leader-epoch-checkpoint", batches)
    assert cache.entries == saved(cache) == [(0, 3), (2, 9), (3, 20)]


# -- model check ------------------------------------------------------------------------
# A log described offset by offset (the epoch of each offset), changed as a replica's log
# is: appends at the end by the epoch leading then (never lower than the last one), a
# follower's truncation, retention moving the start. When retention empties the log, the
# cache keeps the latest epoch at the new start (the partition's epoch must survive).
operations = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(0, 2), st.integers(1, 4)),
        st.tuples(st.just("truncate"), st.integers(0, 40)),
        st.tuples(st.just("retain"), st.integers(0, 40)),
    ),
    max_size=40,
)


@settings(max_examples=150, deadline=None)
@given(ops=operations)
def test_the_cache_answers_as_the_log_it_describes(tmp_path_factory, ops):
    path = tmp_path_factory.mktemp("epochs") / "leader-epoch-checkpoint"
    cache = LeaderEpochCache(path)
    start, epochs = 0, []  # epochs[i] is the epoch of offset start + i
    kept = None  # the epoch kept at the start of a log retention emptied
    epoch = 0
    for op in ops:
        if op[0] == "append":
            epoch += op[1]
            cache.assign(epoch, start + len(epochs))
            epochs += [epoch] * op[2]
            kept = None
        elif op[0] == "truncate":
            end = max(start, min(op[1], start + len(epochs)))
            del epochs[end - start :]
            cache.truncate_from_end(end)
            if end == start:
                kept = None
        elif min(op[1], start + len(epochs)) > start:
            new_start = min(op[1], start + len(epochs))
            kept = epochs[-1] if new_start == start + len(epochs) else None
            del epochs[: new_start - start]
            start = new_start
            cache.truncate_from_start(start)
    end = start + len(epochs)
    history = epochs or ([kept] if kept is not None else [])
    # One entry per epoch the log holds, at its first offset.
    expected = [(e, start + i) for i, e in enumerate(history) if i == 0 or history[i - 1] != e]
    assert [tuple(x) for x in cache.entries] == expected
    if path.exists():
        assert saved(cache) == cache.entries
    for requested in range(-1, epoch + 2):
        answer = cache.end_offset_for(requested, end)
        if not history or requested < 0 or requested > history[-1]:
            assert answer == UNDEFINED
        elif requested == history[-1]:
            assert answer == (requested, end)
        elif requested < history[0]:
            assert answer == (requested, start)
        else:
            floor = max(e for e in history if e <= requested)
            first_above = start + next(i for i, e in enumerate(history) if e > requested)
            assert answer == (floor, first_above)
    for i, e in enumerate(epochs):
        assert cache.epoch_for_offset(start + i) == e
