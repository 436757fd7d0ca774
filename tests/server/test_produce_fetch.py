"""Produce and Fetch through the dispatcher: appends, errors, long polls in the purgatory."""

from __future__ import annotations

import pytest

from broker.protocol.apis import FETCH, PRODUCE
from broker.protocol.errors import ErrorCode
from broker.records.batch import build_batch, iter_records
from broker.records.header import CODEC_LZ4
from tests.helpers.inprocess_broker import NoResponse, Respond, Wait
from tests.helpers.server_requests import create, fetch, fetch_body, produce, produce_body, values


def _values_of(partition: dict, start: int = 0) -> list[bytes]:
    return [r.value for r in iter_records(partition["records"], start)]


@pytest.mark.parametrize("version", range(3, 9))
def test_produce_then_fetch_every_version(broker, version):
    create(broker, "t")
    first = produce(broker, "t", values(b"a", b"b"), version=version)
    second = produce(broker, "t", values(b"c", codec=CODEC_LZ4), version=version)
    assert (first["error_code"], first["base_offset"]) == (0, 0)
    assert (second["error_code"], second["base_offset"]) == (0, 2)
    p = fetch(broker, "t", 1)
    assert (p["error_code"], p["high_watermark"]) == (0, 3)
    assert _values_of(p, 1) == [b"b", b"c"]


def test_acks_zero_gets_no_response_but_is_appended(broker):
    create(broker, "t")
    outcome = broker.send(PRODUCE, 8, produce_body("t", values(b"x"), acks=0))
    assert isinstance(outcome, NoResponse)
    assert _values_of(fetch(broker, "t", 0)) == [b"x"]


@pytest.mark.parametrize(
    ("records", "topic", "acks", "code"),
    [
        (values(b"x"), "nope", -1, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        (values(b"x"), "t", 2, ErrorCode.INVALID_REQUIRED_ACKS),
        (values(b"x")[:-1], "t", -1, ErrorCode.CORRUPT_MESSAGE),  # truncated
        (values(b"x")[:30] + b"\xff" + values(b"x")[31:], "t", -1, ErrorCode.CORRUPT_MESSAGE),
        (values(b"x" * 2000), "small", -1, ErrorCode.MESSAGE_TOO_LARGE),
        (b"", "t", -1, ErrorCode.INVALID_RECORD),
        (None, "t", -1, ErrorCode.INVALID_RECORD),
    ],
)
def test_produce_errors_leave_the_log_untouched(broker, records, topic, acks, code):
    create(broker, "t")
    create(broker, "small", configs={"max.message.bytes": "1000"})
    body = produce_body(topic, records, acks=acks)
    (p,) = broker.call(PRODUCE, 8, body)["responses"][0]["partition_responses"]
    assert p["error_code"] == code
    assert p["error_message"] or code in (
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.INVALID_REQUIRED_ACKS
    )  # fmt: skip
    if topic != "nope":
        assert fetch(broker, topic, 0)["high_watermark"] == 0


def test_idempotent_retry_is_answered_with_the_original_offset(broker):
    create(broker, "t")

    def batch(seq, value):
        return build_batch([(None, value, 1, [])], producer_id=7, producer_epoch=0,
                           base_sequence=seq)  # fmt: skip

    assert produce(broker, "t", batch(0, b"a"))["base_offset"] == 0
    assert produce(broker, "t", batch(1, b"b"))["base_offset"] == 1
    retry = produce(broker, "t", batch(1, b"b"))
    assert (retry["error_code"], retry["base_offset"]) == (0, 1)
    gap = produce(broker, "t", batch(5, b"c"))
    assert gap["error_code"] == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert _values_of(fetch(broker, "t", 0)) == [b"a", b"b"]


def test_log_append_time_topic_stamps_batches_with_the_broker_clock(broker):
    create(broker, "t", configs={"message.timestamp.type": "LogAppendTime"})
    p = produce(broker, "t", values(b"a", b"b", timestamp=5))
    assert p["log_append_time_ms"] == broker.clock.now
    records = list(iter_records(fetch(broker, "t", 0)["records"]))
    assert [r.timestamp for r in records] == [broker.clock.now] * 2
    create(broker, "create-time")
    assert produce(broker, "create-time", values(b"a"))["log_append_time_ms"] == -1


def test_broker_level_log_append_time(make_broker):
    b = make_broker(**{"log.message.timestamp.type": "LogAppendTime"})
    create(b, "t")
    create(b, "t2", configs={"message.timestamp.type": "CreateTime"})  # topic wins
    assert produce(b, "t", values(b"a", timestamp=5))["log_append_time_ms"] == b.clock.now
    assert produce(b, "t2", values(b"a", timestamp=5))["log_append_time_ms"] == -1


def test_fetch_errors_carry_an_empty_record_set_not_null(broker):
    """librdkafka reads a null record set as a corrupt Fetch response (and never sees
    the error): every partition answer has records, empty with an error."""
    create(broker, "t")
    produce(broker, "t", values(b"a"))
    for p in (
        fetch(broker, "t", 5),  # past the end
        fetch(broker, "nope", 0),
        fetch(broker, "t", 0, leader_epoch=3),
    ):
        assert p["error_code"] != 0
        assert p["records"] is not None and len(p["records"]) == 0
    codes = [fetch(broker, "t", 5)["error_code"], fetch(broker, "nope", 0)["error_code"]]
    assert codes == [ErrorCode.OFFSET_OUT_OF_RANGE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
    assert fetch(broker, "t", 0, leader_epoch=3)["error_code"] == ErrorCode.UNKNOWN_LEADER_EPOCH


def test_fetch_at_the_end_is_empty_and_the_first_batch_comes_whole(broker):
    create(broker, "t")
    produce(broker, "t", values(b"x" * 500, b"y" * 500))
    produce(broker, "t", values(b"z"))
    at_end = fetch(broker, "t", 3)
    assert (at_end["error_code"], len(at_end["records"])) == (0, 0)
    small = fetch(broker, "t", 0, max_bytes=10)  # KIP-74: one whole batch anyway
    assert _values_of(small) == [b"x" * 500, b"y" * 500]


def test_long_poll_waits_in_the_purgatory_until_data_arrives(broker):
    create(broker, "t")
    outcome = broker.send(FETCH, 11, fetch_body("t", 0, max_wait_ms=500, min_bytes=1))
    assert isinstance(outcome, Wait)
    assert broker.answer_of(outcome) is None and len(broker.state.fetch_purgatory) == 1
    produce(broker, "t", values(b"hello"))  # the high watermark moves: the fetch completes
    answer = broker.answer_of(outcome)
    assert isinstance(answer, Respond)
    (p,) = broker.decode(FETCH, 11, answer)["responses"][0]["partitions"]
    assert _values_of(p) == [b"hello"]
    assert len(broker.state.fetch_purgatory) == 0


def test_long_poll_answers_empty_at_its_deadline(broker):
    create(broker, "t")
    outcome = broker.send(FETCH, 11, fetch_body("t", 0, max_wait_ms=500, min_bytes=1))
    assert broker.advance(499) == 0 and broker.answer_of(outcome) is None
    assert broker.advance(1) == 1
    (p,) = broker.decode(FETCH, 11, broker.answer_of(outcome))["responses"][0]["partitions"]
    assert (p["error_code"], len(p["records"])) == (0, 0)


def test_long_poll_below_min_bytes_keeps_waiting(broker):
    create(broker, "t")
    outcome = broker.send(FETCH, 11, fetch_body("t", 0, max_wait_ms=1000, min_bytes=10_000))
    produce(broker, "t", values(b"small"))
    assert broker.answer_of(outcome) is None  # woken, checked, still short of min_bytes
    produce(broker, "t", values(b"x" * 20_000))
    (p,) = broker.decode(FETCH, 11, broker.answer_of(outcome))["responses"][0]["partitions"]
    assert _values_of(p) == [b"small", b"x" * 20_000]


def test_long_poll_with_a_partition_error_answers_at_once(broker):
    outcome = broker.send(FETCH, 11, fetch_body("nope", 0, max_wait_ms=1000, min_bytes=1))
    assert isinstance(outcome, Respond)


def test_zstd_needs_produce_v7_and_fetch_v10(broker):
    """Older clients cannot handle zstd (KIP-110): Kafka refuses both directions."""
    from broker.records.header import CODEC_ZSTD

    create(broker, "t")
    assert produce(broker, "t", values(b"z", codec=CODEC_ZSTD), version=6)["error_code"] == (
        ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
    )
    produce(broker, "t", values(b"plain"), version=6)
    assert produce(broker, "t", values(b"z", codec=CODEC_ZSTD), version=7)["error_code"] == 0
    old = fetch(broker, "t", 0, version=9)
    assert old["error_code"] == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE and not old["records"]
    assert _values_of(fetch(broker, "t", 0, version=10)) == [b"plain", b"z"]
    assert _values_of(fetch(broker, "t", 0, version=9, max_bytes=1)) == [b"plain"]  # KIP-74


def test_high_watermark_after_an_unclean_stop_covers_every_recovered_record(tmp_path):
    from tests.helpers.inprocess_broker import InProcessBroker

    first = InProcessBroker(tmp_path / "logs")
    create(first, "t")
    produce(first, "t", values(b"a"))
    replicas = first.state.replicas
    replicas.logs.checkpoint(replicas.high_watermarks())  # checkpoint at 1...
    produce(first, "t", values(b"b", b"c"))  # ...then two more, and no clean stop
    again = InProcessBroker(tmp_path / "logs")
    p = fetch(again, "t", 0)
    assert p["high_watermark"] == 3 and _values_of(p) == [b"a", b"b", b"c"]


def test_acks_all_on_a_single_broker_answers_at_once(broker):
    create(broker, "t")
    answer = broker.call(PRODUCE, 8, produce_body("t", values(b"x"), acks=-1))
    (p,) = answer["responses"][0]["partition_responses"]
    assert (p["error_code"], p["base_offset"]) == (0, 0)
    assert len(broker.state.produce_purgatory) == 0


def test_min_insync_replicas_above_the_isr_refuses_acks_all_only(broker):
    create(broker, "strict", configs={"min.insync.replicas": "2"})
    refused = broker.call(PRODUCE, 8, produce_body("strict", values(b"x"), acks=-1))
    (p,) = refused["responses"][0]["partition_responses"]
    assert p["error_code"] == ErrorCode.NOT_ENOUGH_REPLICAS and "min.insync" in p["error_message"]
    ok = broker.call(PRODUCE, 8, produce_body("strict", values(b"y"), acks=1))
    assert ok["responses"][0]["partition_responses"][0]["error_code"] == 0
    assert _values_of(fetch(broker, "strict", 0)) == [b"y"]
