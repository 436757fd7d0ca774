"""Compacted topics through the request handling: the key check at produce, the
cleanup.policy override, fetches across the gaps the cleaner leaves."""

from __future__ import annotations

from broker.log.cleaner import LogCleaner
from broker.protocol.errors import ErrorCode
from broker.records.batch import build_batch, iter_batches, iter_records
from broker.server.broker import cleaner_view
from tests.helpers.server_requests import create, fetch, produce, values

COMPACTED = {"cleanup.policy": "compact", "segment.bytes": "1024"}


def keyed(*pairs, timestamp: int = 1_000) -> bytes:
    return build_batch([(k, v, timestamp + i, []) for i, (k, v) in enumerate(pairs)])


def test_a_compacted_topic_refuses_records_without_a_key(broker):
    create(broker, "c", configs=COMPACTED)
    create(broker, "plain")
    refused = produce(broker, "c", keyed((b"a", b"1"), (None, b"2"), (b"b", b"3"), (None, b"4")))
    assert refused["error_code"] == ErrorCode.INVALID_RECORD
    assert [e["batch_index"] for e in refused["record_errors"]] == [1, 3]
    assert (
        "Compacted topic cannot accept message without key in topic partition c-0."
        in (refused["record_errors"][0]["batch_index_error_message"])
    )
    assert "2 record errors" in refused["error_message"]
    assert fetch(broker, "c", 0)["high_watermark"] == 0
    assert produce(broker, "c", keyed((b"a", b"1"), (b"b", None)))["error_code"] == 0
    assert produce(broker, "plain", values(b"no key"))["error_code"] == 0


def test_cleanup_policy_is_checked_at_create(broker):
    topic = create(broker, "bad", configs={"cleanup.policy": "compact,shred"})
    assert topic["error_code"] == ErrorCode.INVALID_CONFIG
    assert "cleanup.policy" in topic["error_message"] and "shred" in topic["error_message"]
    both = create(broker, "both", configs={"cleanup.policy": "compact,delete"})
    assert both["error_code"] == 0
    log = broker.state.replicas.get("both", 0).log
    assert log.config.compact and log.config.delete


def test_fetches_read_the_survivors_across_the_gaps(broker):
    create(broker, "c", configs=COMPACTED)
    for i in range(120):
        assert produce(broker, "c", keyed((b"k%d" % (i % 5), b"v%d" % i)))["error_code"] == 0
    replicas = broker.state.replicas
    cleaner = LogCleaner(replicas.logs, now_ms=broker.clock, partition_state=cleaner_view(replicas))
    result = cleaner.clean_once()
    assert result is not None and result.map_end > 50

    def read_from(offset: int) -> list[tuple[int, bytes]]:
        got, position = [], offset
        while position < 120:
            p = fetch(broker, "c", position, max_bytes=200)
            assert p["error_code"] == 0
            records = list(iter_records(p["records"], position))
            got += [(r.offset, r.value) for r in records]
            position = max(h.next_offset for _, h in iter_batches(p["records"]))
        return got

    everything = read_from(0)
    below = [r for r in everything if r[0] < result.map_end]
    assert len(below) <= 5  # one per key
    assert everything[-1] == (119, b"v119")
    for start in (1, 7, 33, result.map_end - 1):
        assert read_from(start) == [r for r in everything if r[0] >= start]
