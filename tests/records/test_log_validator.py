"""The leader's per-record pass over a produced batch (broker/records/log_validator.py via
validate_append): recompression to the topic's codec, the CreateTime window, keys of
compacted topics, and what a rebuilt batch keeps."""

from __future__ import annotations

import os

import pytest

from broker.config.definition import ConfigError
from broker.log.config import LogConfig
from broker.protocol.errors import ErrorCode
from broker.records.batch import build_batch, check_batch, decode_batch
from broker.records.header import (
    CODEC_GZIP,
    CODEC_LZ4,
    CODEC_NONE,
    CODEC_ZSTD,
    CONTROL,
    HEADER_SIZE,
    compute_crc,
    parse_header,
    set_crc,
)
from broker.records.log_validator import (
    LONG_MAX,
    AppendRules,
    compression_level,
    recompress,
)
from broker.records.spans import scan_records
from broker.records.validate import RecordsError, validate_append
from broker.server.topic_config import apply_overrides

NOW = 1_700_000_000_000
MAX = 1024 * 1024
CODECS = [0, 1, 2, 3, 4]


def batch(codec=CODEC_NONE, timestamps=(NOW, NOW + 1, NOW + 2), **kwargs) -> bytes:
    records = [
        (b"k%d" % i, b"value %d " % i * 20, ts, [("h", b"v%d" % i)])
        for i, ts in enumerate(timestamps)
    ]
    return build_batch(records, codec=codec, **kwargs)


def validate(raw: bytes, rules: AppendRules, now: int = NOW, max_bytes: int = MAX):
    return validate_append(raw, max_bytes, rules, now, partition_name="t-0")


def refusal(raw: bytes, rules: AppendRules, **kw) -> RecordsError:
    with pytest.raises(RecordsError) as info:
        validate(raw, rules, **kw)
    return info.value


@pytest.mark.parametrize("source", CODECS)
@pytest.mark.parametrize("target", CODECS)
def test_each_codec_is_recompressed_to_each(source, target):
    raw = batch(source, producer_id=7, producer_epoch=2, base_sequence=40)
    records, [(pos, header)] = validate(raw, AppendRules(codec=target))
    if source == target:
        assert records is raw  # in place: not even copied
        return
    assert pos == 0 and header.codec == target and len(records) == header.size
    assert check_batch(records) == header  # header, length and CRC agree
    before, after = decode_batch(raw)[1], decode_batch(records)[1]
    assert after == before  # offsets, timestamps, keys, values, headers
    old = parse_header(raw)
    for field in ("producer_id", "producer_epoch", "base_sequence", "base_timestamp"):
        assert getattr(header, field) == getattr(old, field)
    assert header.max_timestamp == NOW + 2
    assert header.records_count == 3 and header.last_offset_delta == 2


@pytest.mark.parametrize("codec", CODECS)
def test_producer_keeps_every_batch_as_produced(codec):
    raw = batch(codec)
    records, [(_, header)] = validate(raw, AppendRules())
    assert records is raw and header.codec == codec
    # Only the rules that need records walk them; the defaults do not.
    assert not AppendRules().needs_records(header)
    assert not AppendRules(codec=codec).needs_records(header)


def test_transactional_batches_keep_producer_fields_and_flags():
    raw = batch(CODEC_NONE, producer_id=9, producer_epoch=3, base_sequence=17, transactional=True)
    records, [(_, header)] = validate(raw, AppendRules(codec=CODEC_ZSTD))
    assert header.is_transactional and not header.is_control
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (9, 3, 17)
    assert header.codec == CODEC_ZSTD
    assert decode_batch(records)[1] == decode_batch(raw)[1]


def test_control_batches_written_uncompressed_stay_uncompressed():
    control = parse_header(batch(CODEC_NONE, is_control=True, transactional=True))
    assert control.attributes & CONTROL
    assert AppendRules(codec=CODEC_GZIP).target_codec(control) == CODEC_NONE
    compressed_control = parse_header(batch(CODEC_LZ4, is_control=True))
    assert AppendRules(codec=CODEC_GZIP).target_codec(compressed_control) == CODEC_GZIP
    # Clients may not write control batches at all (validate.py, INVALID_RECORD).
    raw = batch(CODEC_NONE, is_control=True)
    assert refusal(raw, AppendRules(codec=CODEC_GZIP)).error_code == ErrorCode.INVALID_RECORD


def test_rebuilt_batches_number_the_records_in_order():
    """Kafka's builder writes offset deltas 0, 1, 2, ...; a batch whose records say
    otherwise is renumbered when it is rebuilt anyway."""
    raw = bytearray(batch(CODEC_NONE))
    header = parse_header(raw)
    section = bytes(raw[HEADER_SIZE:])
    for span in scan_records(section, 3):
        raw[HEADER_SIZE + span[2]] = 0  # every offsetDelta varint -> 0
    set_crc(raw, 0, compute_crc(raw, 0, len(raw)))
    assert [r.offset for r in decode_batch(raw)[1]] == [0, 0, 0]
    records, _ = validate(bytes(raw), AppendRules(codec=CODEC_GZIP))
    assert [r.offset for r in decode_batch(records)[1]] == [0, 1, 2]
    assert [r.value for r in decode_batch(records)[1]] == [
        r.value for r in decode_batch(batch())[1]
    ]
    # The same walk, directly: maxTimestamp is recomputed from the records.
    spans = scan_records(bytes(raw[HEADER_SIZE:]), 3)
    _, rebuilt = recompress(header._replace(max_timestamp=0), section, spans, CODEC_NONE, None)
    assert rebuilt.max_timestamp == NOW + 2


def test_a_batch_grown_past_the_limit_by_recompression_is_too_large():
    noise = build_batch([(None, os.urandom(4000), NOW, [])])
    assert validate(noise, AppendRules(), max_bytes=len(noise))[0] is noise
    error = refusal(noise, AppendRules(codec=CODEC_GZIP), max_bytes=len(noise))
    assert error.error_code == ErrorCode.MESSAGE_TOO_LARGE
    assert "after recompression" in error.message


def test_levels_reach_the_codec():
    data = batch(CODEC_NONE, timestamps=[NOW] * 200)
    sizes = {
        level: validate(data, AppendRules(codec=CODEC_GZIP, level=level))[1][0][1].size
        for level in (1, 9)
    }
    assert sizes[9] < sizes[1]
    # Kafka's defaults map to the codec's default; any other level is passed on.
    assert compression_level(CODEC_GZIP, -1, 9, 3) is None
    assert compression_level(CODEC_GZIP, 1, 9, 3) == 1
    assert compression_level(CODEC_LZ4, -1, 9, 3) is None  # lz4's fast compressor
    assert compression_level(CODEC_LZ4, -1, 12, 3) == 12
    assert compression_level(CODEC_ZSTD, -1, 9, -5) == -5
    assert compression_level(None, 1, 1, 1) is None
    for codec, level in ((CODEC_LZ4, 17), (CODEC_ZSTD, -5), (CODEC_ZSTD, 22)):
        records, _ = validate(data, AppendRules(codec=codec, level=level))
        assert decode_batch(records)[1] == decode_batch(data)[1]


# --- timestamps -----------------------------------------------------------------------


def test_create_time_records_outside_the_window_are_refused_one_by_one():
    rules = AppendRules(before_max_ms=1000, after_max_ms=100)
    raw = batch(timestamps=(NOW - 1000, NOW - 1001, NOW + 100, NOW + 101, -1))
    error = refusal(raw, rules)
    assert error.error_code == ErrorCode.INVALID_TIMESTAMP
    assert error.message == "One or more records have been rejected due to invalid timestamp"
    assert [i for i, _ in error.record_errors] == [1, 3]  # the bounds and -1 pass
    assert error.record_errors[0][1] == (
        f"Timestamp {NOW - 1001} of message with offset 1 is out of range. The timestamp "
        f"should be within [{NOW - 1000}, {NOW + 100}]"
    )
    inside = batch(timestamps=(NOW - 1000, NOW, NOW + 100))
    assert validate(inside, rules)[0] is inside  # checked, and kept as produced


@pytest.mark.parametrize("codec", [CODEC_NONE, CODEC_LZ4])
def test_the_window_is_checked_in_the_same_pass_as_the_rebuild(codec):
    old = batch(codec, timestamps=(NOW - 10_000,))
    rules = AppendRules(codec=CODEC_ZSTD, before_max_ms=5_000)
    assert refusal(old, rules).error_code == ErrorCode.INVALID_TIMESTAMP
    fresh = batch(codec, timestamps=(NOW - 10,))
    assert validate(fresh, rules)[1][0][1].codec == CODEC_ZSTD


def test_log_append_time_topics_do_not_check_create_times():
    rules = AppendRules(before_max_ms=0, after_max_ms=0, log_append_time=True)
    raw = batch(timestamps=(1, 2, 3))
    assert not rules.checks_timestamps
    assert validate(raw, rules)[0] is raw
    # Only the broker stamps LogAppendTime: a producer's mark is refused there.
    marked = batch(timestamp_type_log_append=True)
    error = refusal(marked, rules)
    assert error.error_code == ErrorCode.INVALID_TIMESTAMP
    assert [i for i, _ in error.record_errors] == [0, 1, 2]


def test_a_producer_log_append_time_batch_in_a_create_time_topic_is_judged_by_max_timestamp():
    marked = batch(timestamps=(NOW - 50_000, NOW - 40_000, NOW), timestamp_type_log_append=True)
    assert validate(marked, AppendRules(before_max_ms=1_000))[0] is marked
    late = batch(timestamps=(NOW, NOW + 5_000), timestamp_type_log_append=True)
    error = refusal(late, AppendRules(after_max_ms=1_000))
    assert [i for i, _ in error.record_errors] == [0, 1]


def test_key_errors_come_first_and_timestamp_errors_set_the_code():
    records = [(None, b"a", NOW, []), (b"k", b"b", NOW - 9_000, []), (None, b"c", NOW - 9_000, [])]
    raw = build_batch(records)
    rules = AppendRules(compacted=True, before_max_ms=1_000)
    error = refusal(raw, rules)
    assert error.error_code == ErrorCode.INVALID_TIMESTAMP
    assert [i for i, _ in error.record_errors] == [0, 1, 2]
    assert (
        "without key" in error.record_errors[0][1] and "out of range" in error.record_errors[1][1]
    )
    keyless = refusal(build_batch(records[:1]), AppendRules(compacted=True))
    assert keyless.error_code == ErrorCode.INVALID_RECORD


# --- the topic's config -----------------------------------------------------------------


def test_the_deprecated_difference_applies_where_the_new_keys_are_unset():
    assert LogConfig().timestamp_window == (LONG_MAX, LONG_MAX)
    old = apply_overrides(LogConfig(), {"message.timestamp.difference.max.ms": "500"})
    assert old.timestamp_window == (500, 500)
    both = apply_overrides(
        LogConfig(),
        {"message.timestamp.difference.max.ms": "500", "message.timestamp.after.max.ms": "7"},
    )
    assert both.timestamp_window == (500, 7)
    rules = both.append_rules
    assert (rules.before_max_ms, rules.after_max_ms, rules.codec) == (500, 7, None)


def test_compression_keys_become_rules():
    config = apply_overrides(
        LogConfig(), {"compression.type": "zstd", "compression.zstd.level": "-7"}
    )
    rules = config.append_rules
    assert (rules.codec, rules.level) == (CODEC_ZSTD, -7)
    uncompressed = apply_overrides(LogConfig(), {"compression.type": "uncompressed"})
    assert uncompressed.append_rules.codec == CODEC_NONE
    assert LogConfig(cleanup_policy=("compact",)).append_rules.compacted
    assert LogConfig().append_rules == AppendRules()  # the fast path's rules


@pytest.mark.parametrize(
    "key, value",
    [
        ("compression.type", "none"),
        ("compression.type", "LZ5"),
        ("compression.gzip.level", "0"),
        ("compression.gzip.level", "-2"),
        ("compression.gzip.level", "10"),
        ("compression.lz4.level", "0"),
        ("compression.lz4.level", "18"),
        ("compression.zstd.level", "23"),
        ("compression.zstd.level", "-131073"),
        ("message.timestamp.before.max.ms", "-1"),
        ("message.timestamp.difference.max.ms", "-1"),
    ],
)
def test_bad_values_are_refused_naming_key_and_value(key, value):
    with pytest.raises(ConfigError) as info:
        apply_overrides(LogConfig(), {key: value})
    assert key in str(info.value) and repr(value) in str(info.value)


def test_broker_keys_feed_the_log_config():
    from broker.config.server import BrokerConfig

    config = BrokerConfig.from_mapping(
        {
            "compression.type": "gzip",
            "compression.gzip.level": "9",
            "log.message.timestamp.before.max.ms": "60000",
        }
    ).log_config
    assert config.compression_type == "gzip" and config.compression_gzip_level == 9
    assert config.timestamp_window == (60000, LONG_MAX)
