"""Replica placement for new topics, without and with racks."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.controller.placement import PlacementError, assign_replicas, rack_alternated


def test_the_walk_without_racks():
    # Five brokers, start 0: leaders go round; followers shift by one more every 5.
    got = assign_replicas({b: None for b in range(5)}, 10, 3, start_index=0)
    assert got == {
        0: [0, 1, 2], 1: [1, 2, 3], 2: [2, 3, 4], 3: [3, 4, 0], 4: [4, 0, 1],
        5: [0, 2, 3], 6: [1, 3, 4], 7: [2, 4, 0], 8: [3, 0, 1], 9: [4, 1, 2],
    }  # fmt: skip


def test_broker_ids_need_not_be_dense():
    got = assign_replicas({7: None, 3: None, 11: None}, 3, 2, start_index=0)
    assert got == {0: [3, 7], 1: [7, 11], 2: [11, 3]}


def test_rack_alternated_list():
    racks = {0: "a", 1: "a", 2: "b", 3: "b", 4: "c", 5: "a"}
    assert rack_alternated(racks) == [0, 2, 4, 1, 3, 5]


def test_rack_aware_spreads_each_partition_over_racks():
    racks = {0: "a", 1: "a", 2: "b", 3: "b", 4: "c", 5: "c"}
    got = assign_replicas(racks, 12, 3, start_index=0)
    for replicas in got.values():
        assert len({racks[b] for b in replicas}) == 3
    assert Counter(r[0] for r in got.values()) == {b: 2 for b in racks}  # leaders balanced


def test_fewer_racks_than_replicas_still_uses_distinct_brokers():
    racks = {0: "a", 1: "a", 2: "b", 3: "b"}
    for replicas in assign_replicas(racks, 8, 3, start_index=1).values():
        assert len(set(replicas)) == 3 and {racks[b] for b in replicas} == {"a", "b"}


def test_partial_rack_information_is_refused():
    with pytest.raises(PlacementError, match="rack information"):
        assign_replicas({0: "a", 1: None, 2: "b"}, 3, 2)


def test_partitions_added_later_continue_the_walk():
    brokers = dict.fromkeys(range(4))
    whole = assign_replicas(brokers, 8, 2, start_index=2)
    tail = assign_replicas(brokers, 3, 2, start_index=2, first_partition=5)
    assert tail == {p: whole[p] for p in (5, 6, 7)}


@pytest.mark.parametrize(
    ("brokers", "partitions", "factor"), [({}, 1, 1), ({0: None}, 1, 2), ({0: None}, 0, 1)]
)
def test_impossible_requests(brokers, partitions, factor):
    with pytest.raises(PlacementError):
        assign_replicas(brokers, partitions, factor)


@given(
    n=st.integers(1, 9),
    racks=st.integers(0, 4),
    partitions=st.integers(1, 40),
    data=st.data(),
)
def test_every_placement_is_valid_and_leaders_are_balanced(n, racks, partitions, data):
    factor = data.draw(st.integers(1, n))
    brokers = {b * 3: (f"r{b % racks}" if racks else None) for b in range(n)}
    got = assign_replicas(brokers, partitions, factor, rng=random.Random(data.draw(st.integers())))
    assert sorted(got) == list(range(partitions))
    for replicas in got.values():
        assert len(replicas) == factor == len(set(replicas)) and set(replicas) <= set(brokers)
        if racks:
            assert len({brokers[b] for b in replicas}) == min(factor, racks)
    leaders = Counter(r[0] for r in got.values())
    assert max(leaders.values()) - min(leaders.get(b, 0) for b in brokers) <= 1
