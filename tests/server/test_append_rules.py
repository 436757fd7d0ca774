"""The append rules through the produce handler, in process on a hand-driven clock:
recompression before the LogAppendTime stamp, the deprecated difference window, an idempotent
retry of a recompressed batch, and the Produce versions without record errors
(docs/contracts/log.md, "Append validation")."""

from __future__ import annotations

from broker.protocol.errors import ErrorCode
from broker.records.batch import build_batch, decode_batch
from broker.records.header import CODEC_GZIP, CODEC_SNAPPY, TIMESTAMP_TYPE_LOG_APPEND
from tests.helpers.server_requests import create, fetch, produce

NOW = 1_700_000_000_000  # InProcessBroker's clock


def test_a_recompressed_batch_is_stamped_with_log_append_time(broker):
    create(
        broker,
        "lat",
        configs={"compression.type": "gzip", "message.timestamp.type": "LogAppendTime"},
    )
    raw = build_batch([(b"k", b"v" * 100, 5, []), (None, b"w", 6, [])])
    answer = produce(broker, "lat", raw)
    assert answer["error_code"] == 0 and answer["log_append_time_ms"] == NOW
    header, records = decode_batch(fetch(broker, "lat", 0)["records"])  # CRC checked
    assert header.codec == CODEC_GZIP and header.attributes & TIMESTAMP_TYPE_LOG_APPEND
    assert header.max_timestamp == NOW and [r.timestamp for r in records] == [NOW, NOW]
    assert [r.value for r in records] == [b"v" * 100, b"w"]


def test_the_deprecated_difference_is_the_window_when_the_new_keys_are_unset(broker):
    create(broker, "diff", configs={"message.timestamp.difference.max.ms": "1000"})
    late = produce(broker, "diff", build_batch([(None, b"x", NOW + 1001, [])]))
    assert late["error_code"] == ErrorCode.INVALID_TIMESTAMP
    assert produce(broker, "diff", build_batch([(None, b"x", NOW + 1000, [])]))["error_code"] == 0
    create(broker, "both", configs={
        "message.timestamp.difference.max.ms": "1000", "message.timestamp.after.max.ms": "5000",
    })  # fmt: skip
    assert produce(broker, "both", build_batch([(None, b"x", NOW + 4000, [])]))["error_code"] == 0
    early = produce(broker, "both", build_batch([(None, b"x", NOW - 1001, [])]), version=7)
    # Produce v7 has no record errors nor message: the code alone.
    assert early["error_code"] == ErrorCode.INVALID_TIMESTAMP
    assert early.get("record_errors", []) == [] and early.get("error_message") is None


def test_a_retried_idempotent_batch_is_still_a_duplicate_after_recompression(broker):
    create(broker, "idem", configs={"compression.type": "snappy"})
    raw = build_batch([(None, b"once", NOW, [])], producer_id=4, producer_epoch=0, base_sequence=0)
    first = produce(broker, "idem", raw)
    retry = produce(broker, "idem", raw)
    assert first["error_code"] == retry["error_code"] == 0
    assert first["base_offset"] == retry["base_offset"] == 0
    header, records = decode_batch(fetch(broker, "idem", 0)["records"])
    assert header.codec == CODEC_SNAPPY and (header.producer_id, header.base_sequence) == (4, 0)
    assert fetch(broker, "idem", 0)["high_watermark"] == 1
