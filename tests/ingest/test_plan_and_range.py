"""Planning and range reading against a real broker."""

from __future__ import annotations

import pytest

from broker.client.admin import AdminClient, NewTopic
from broker.client.producer import Producer
from broker.client.simple_consumer import SimpleConsumer
from ingest.plan import GapError, PartitionRange, plan_ranges, select_topics, split_tasks
from ingest.range_reader import RangeReader


def test_select_topics_by_full_match():
    topics = ["page-views", "page-views-v2", "_audit", "_schemas", "clicks", "searches"]
    assert select_topics(topics, [".*"], ["_.*"]) == [
        "clicks",
        "page-views",
        "page-views-v2",
        "searches",
    ]
    assert select_topics(topics, ["page-views"], []) == ["page-views"]
    assert select_topics(topics, ["page-.*", "clicks"], [".*-v2"]) == ["clicks", "page-views"]


@pytest.fixture(scope="module")
def loaded(broker):
    with AdminClient(broker.bootstrap) as admin:
        admin.create_topics([NewTopic("plan-a", 2), NewTopic("plan-b", 1)])
    with Producer(broker.bootstrap, linger_ms=0, batch_size=2000) as producer:
        for i in range(300):
            producer.send("plan-a", f"a{i}".encode() * 20, partition=i % 2)
        for i in range(50):
            producer.send("plan-b", f"b{i}".encode(), partition=0)
        producer.flush()
    consumer = SimpleConsumer(broker.bootstrap)
    yield consumer
    consumer.close()


def test_plan_from_stored_offsets_and_limits(loaded):
    ranges = plan_ranges(
        loaded, ["plan-a", "plan-b"], {("plan-a", 0): 100}, max_records_per_partition=120
    )
    by_tp = {(r.topic, r.partition): r for r in ranges}
    assert (by_tp[("plan-a", 0)].first, by_tp[("plan-a", 0)].next) == (100, 150)
    assert (by_tp[("plan-a", 1)].first, by_tp[("plan-a", 1)].next) == (0, 120)
    assert (by_tp[("plan-b", 0)].first, by_tp[("plan-b", 0)].next) == (0, 50)
    latest = plan_ranges(
        loaded, ["plan-b"], {}, new_partition_start="latest", max_records_per_partition=10
    )
    assert (latest[0].first, latest[0].next) == (50, 50)


def test_stored_offset_past_the_high_watermark_is_refused(loaded):
    with pytest.raises(GapError, match="past the high watermark"):
        plan_ranges(loaded, ["plan-b"], {("plan-b", 0): 999}, max_records_per_partition=10)


def test_split_tasks_cover_each_range_exactly_once(loaded):
    ranges = plan_ranges(loaded, ["plan-a", "plan-b"], {}, max_records_per_partition=1000)
    tasks = split_tasks(ranges, 40)
    for r in ranges:
        mine = sorted(
            (t.start, t.end) for t in tasks if (t.topic, t.partition) == (r.topic, r.partition)
        )
        assert mine[0][0] == r.first and mine[-1][1] == r.next
        assert all(a[1] == b[0] for a, b in zip(mine, mine[1:], strict=False))
        assert all(end - start <= 40 for start, end in mine)


def test_plan_records_each_partitions_leader(loaded, broker):
    ranges = plan_ranges(loaded, ["plan-a", "plan-b"], {}, max_records_per_partition=1000)
    (node,) = loaded.cluster.brokers  # a single broker leads everything
    assert {r.leader for r in ranges} == {node}
    assert {t.leader for t in split_tasks(ranges, 40)} == {node}


def test_split_tasks_lets_leaders_take_turns_largest_first():
    def rng(topic, partition, size, leader):
        return PartitionRange(topic, partition, 0, size, 0, size, None, leader)

    ranges = [
        rng("a", 0, 250, leader=1),  # tasks of 100, 100, 50
        rng("a", 1, 90, leader=1),
        rng("b", 0, 100, leader=2),
        rng("b", 1, 30, leader=3),
        rng("c", 0, 0, leader=3),  # empty: no task
    ]
    tasks = split_tasks(ranges, 100)
    order = [(t.leader, t.end - t.start) for t in tasks]
    # Each turn: the next largest task of every leader that has one, largest first.
    assert order == [(1, 100), (2, 100), (3, 30), (1, 100), (1, 90), (1, 50)]
    assert {(t.topic, t.partition, t.index) for t in tasks} == {
        ("a", 0, 0), ("a", 0, 1), ("a", 0, 2), ("a", 1, 0), ("b", 0, 0), ("b", 1, 0)
    }  # fmt: skip


def test_range_reader_stops_exactly_at_the_end_from_mid_batch(loaded):
    # Batches hold several records; start and end fall inside batches.
    reader = RangeReader(loaded, "plan-a", 0, 13, 77, fetch_bytes=4096)
    offsets = [o for chunk in reader.chunks() for o in chunk.offset.to_pylist()]
    assert offsets == list(range(13, 77))
    assert (reader.records, reader.skipped, reader.position) == (64, 0, 77)
    assert reader.read_from == list(loaded.cluster.brokers)  # one broker answered


def test_range_reader_byte_budget_stops_early_at_a_batch_boundary(loaded):
    reader = RangeReader(loaded, "plan-a", 1, 0, 150, fetch_bytes=2048, max_bytes=3000)
    offsets = [o for chunk in reader.chunks() for o in chunk.offset.to_pylist()]
    assert reader.stopped_early
    assert offsets == list(range(0, reader.position))
    assert reader.bytes_read >= 3000
