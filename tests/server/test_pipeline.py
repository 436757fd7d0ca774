"""A connection's read-ahead, no socket: frames pushed into a `Pipeline` over the real
broker state, answers taken in order. A partition led here with a follower in its ISR, so
an acks=all Produce waits in the purgatory until the follower's fetch moves the high
watermark."""

from __future__ import annotations

import asyncio
import struct

from prometheus_client import generate_latest

from broker.metrics.definitions import BrokerMetrics
from broker.protocol.apis import CREATE_TOPICS, FETCH, METADATA, PRODUCE
from broker.server.dispatch import Close, NoResponse, Respond
from broker.server.network import NetworkServer
from broker.server.pipeline import Pipeline
from tests.helpers.metrics import Scrape
from tests.helpers.server_requests import fetch_body, produce_body, values


def _pipeline(broker, depth: int = 10) -> tuple[Pipeline, list[int]]:
    answers: list[int] = []
    pipeline = Pipeline(broker.state, broker.session, depth, on_answer=lambda: answers.append(1))
    return pipeline, answers


def _take(pipeline: Pipeline) -> list:
    out = []
    while (entry := pipeline.next_answered()) is not None:
        out.append(entry.outcome)
    return out


def _produce(broker, value: bytes, acks: int = -1, **batch) -> bytes:
    return broker.frame(PRODUCE, 8, produce_body("t", values(value, **batch), acks=acks))


def _follower_fetch(broker, offset: int) -> bytes:
    return broker.frame(FETCH, 11, {**fetch_body("t", offset), "replica_id": 1})


def _metadata(broker) -> bytes:
    return broker.frame(METADATA, 9, {"topics": None, "allow_auto_topic_creation": False})


def _partition(broker, api_key: int, outcome) -> dict:
    assert isinstance(outcome, Respond), outcome
    version = 8 if api_key == PRODUCE else 11
    body = broker.decode(api_key, version, outcome)
    key = "partition_responses" if api_key == PRODUCE else "partitions"
    return body["responses"][0][key][0]


def test_produces_behind_a_waiting_one_are_appended_in_order_and_answered_in_order(led):
    pipeline, _ = _pipeline(led)
    for i in range(5):
        assert pipeline.accepts()
        pipeline.handle(_produce(led, b"v%d" % i), 0.0)
    assert pipeline.waiting == 5 and _take(pipeline) == []  # all appended, none replicated
    assert led.state.replicas.get("t", 0).log.log_end_offset == 5
    pipeline.handle(_metadata(led), 0.0)  # answered at once, sent after the produces
    assert _take(pipeline) == []
    # One follower fetch from the log end moves the high watermark past all five.
    follower = led.outcome(_follower_fetch(led, 5))
    assert isinstance(follower, Respond)
    answers = _take(pipeline)
    assert len(answers) == 6 and len(pipeline) == 0
    assert [_partition(led, PRODUCE, a)["base_offset"] for a in answers[:5]] == list(range(5))
    assert led.decode(METADATA, 9, answers[5])["topics"][0]["name"] == "t"


def test_one_follower_fetch_acknowledges_every_produce_that_arrived_meanwhile(led):
    """The group commit, counted: N pipelined acks=all produces, one follower fetch."""
    pipeline, answered = _pipeline(led, depth=8)
    for i in range(8):
        pipeline.handle(_produce(led, b"v%d" % i), 0.0)
    assert not pipeline.accepts()  # the depth bound
    fetches = 0
    while pipeline.waiting:
        end = led.state.replicas.get("t", 0).log.log_end_offset
        led.outcome(_follower_fetch(led, end))
        fetches += 1
    assert fetches == 1 and len(answered) == 8
    assert all(_partition(led, PRODUCE, a)["error_code"] == 0 for a in _take(pipeline))
    assert pipeline.accepts()


def test_the_depth_bounds_requests_handled_ahead_of_their_answers(led):
    pipeline, _ = _pipeline(led, depth=3)
    for i in range(3):
        pipeline.handle(_produce(led, b"v%d" % i), 0.0)
    assert not pipeline.accepts()
    led.outcome(_follower_fetch(led, 3))
    assert not pipeline.accepts()  # answered, but not sent yet: still in flight
    assert len(_take(pipeline)) == 3
    assert pipeline.accepts()


def test_depth_one_handles_one_request_at_a_time_as_kafka_mutes(led):
    pipeline, _ = _pipeline(led, depth=1)
    pipeline.handle(_produce(led, b"a"), 0.0)
    assert not pipeline.accepts()
    led.outcome(_follower_fetch(led, 1))
    assert len(_take(pipeline)) == 1 and pipeline.accepts()


def test_a_wait_for_asynchronous_work_holds_the_requests_behind_it(led):
    pipeline, _ = _pipeline(led)
    body = {
        "topics": [{"name": "u", "num_partitions": 1, "replication_factor": 1,
                    "assignments": [], "configs": []}],
        "timeout_ms": 1000, "validate_only": False,
    }  # fmt: skip
    entry = pipeline.handle(led.frame(CREATE_TOPICS, 4, body), 0.0)
    assert not pipeline.accepts()  # a later request may depend on the topic
    led.run_until_answered(entry.outcome)  # the work done; the pipeline was told too
    assert pipeline.accepts()
    (created,) = _take(pipeline)
    assert led.decode(CREATE_TOPICS, 4, created)["topics"][0]["error_code"] == 0


def test_a_closing_answer_stops_the_pipeline_after_the_answers_before_it(led):
    pipeline, _ = _pipeline(led)
    pipeline.handle(_produce(led, b"a"), 0.0)
    pipeline.handle(b"\x00", 0.0)  # a header that does not decode
    assert pipeline.stopped is not None and not pipeline.accepts()
    assert _take(pipeline) == []  # the close waits behind the produce's answer
    led.outcome(_follower_fetch(led, 1))
    produced, closed = _take(pipeline)
    assert _partition(led, PRODUCE, produced)["error_code"] == 0
    assert isinstance(closed, Close)


def test_acks_0_behind_a_waiting_produce_is_appended_and_answers_nothing(led):
    pipeline, _ = _pipeline(led)
    pipeline.handle(_produce(led, b"a"), 0.0)
    pipeline.handle(_produce(led, b"b", acks=0), 0.0)
    assert led.state.replicas.get("t", 0).log.log_end_offset == 2
    led.outcome(_follower_fetch(led, 2))
    produced, nothing = _take(pipeline)
    assert _partition(led, PRODUCE, produced)["base_offset"] == 0
    assert isinstance(nothing, NoResponse)


def test_an_idempotent_producer_s_pipelined_batches_pass_the_sequence_check_in_order(led):
    pipeline, _ = _pipeline(led, depth=5)
    for seq in range(5):
        frame = _produce(led, b"s%d" % seq, producer_id=7, producer_epoch=0, base_sequence=seq)
        pipeline.handle(frame, 0.0)
    led.outcome(_follower_fetch(led, 5))
    answers = [_partition(led, PRODUCE, a) for a in _take(pipeline)]
    assert [a["error_code"] for a in answers] == [0] * 5
    assert [a["base_offset"] for a in answers] == list(range(5))


def test_a_parked_produce_answered_after_the_connection_went_away_is_dropped(led):
    """The network layer stops listening (on_answer does nothing) when a connection
    closes; the operation still completes and nothing else changes."""
    pipeline, answered = _pipeline(led)
    pipeline.handle(_produce(led, b"a"), 0.0)
    pipeline.on_answer = lambda: None
    led.outcome(_follower_fetch(led, 1))
    assert answered == [] and pipeline.waiting == 0


# -- the same over a socket: broker/server/network.py ----------------------------------


def test_over_a_socket_one_follower_fetch_answers_pipelined_produces_in_one_write(led):
    """Five acks=all produces sent in one segment are all read and appended before any is
    replicated; the follower fetch that acknowledges them readies five answers in one loop
    turn, and they leave in one write, in request order."""
    metrics = led.state.metrics = BrokerMetrics()
    frames = [_produce(led, b"v%d" % i) for i in range(5)]
    first = led._correlation - 4

    async def scenario():
        server = NetworkServer(led.state, "127.0.0.1", 0, 1 << 20)
        port = await server.start()
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"".join(struct.pack(">i", len(f)) + f for f in frames))
        while led.state.replicas.get("t", 0).log.log_end_offset < 5:
            await asyncio.sleep(0.01)
        assert _network(metrics) == (4, 0)  # all read ahead, nothing answered before replication
        led.outcome(_follower_fetch(led, 5))
        correlations = []
        for _ in frames:
            (size,) = struct.unpack(">i", await reader.readexactly(4))
            correlations.append(struct.unpack_from(">i", await reader.readexactly(size))[0])
        writer.close()
        await server.stop()
        return correlations

    assert led.loop.run_until_complete(asyncio.wait_for(scenario(), 30)) == list(
        range(first, first + 5)
    )
    assert _network(metrics) == (4, 1)


def _network(metrics: BrokerMetrics) -> tuple[float, float]:
    """Requests read ahead and answer writes, as scraped."""
    scrape = Scrape(generate_latest(metrics.registry).decode())
    return (
        scrape.value("kafka_network_requests_read_ahead_total"),
        scrape.value("kafka_network_answer_writes_total"),
    )


def test_an_append_does_not_look_at_the_produces_parked_before_it(led, monkeypatch):
    """Issue 23, counted: N pipelined acks=all produces are each checked once when they
    park (their own try-complete), not again at every later append (which moves no high
    watermark while a follower is in the ISR: O(N^2) checks at 5,000 unbatched
    records a second); the follower fetch that moves the high watermark checks each
    once more and completes them all."""
    from broker.server.handlers.produce import DelayedProduce

    checks = []
    real = DelayedProduce.try_complete
    monkeypatch.setattr(
        DelayedProduce, "try_complete", lambda self, now: (checks.append(self), real(self, now))[1]
    )
    pipeline, answered = _pipeline(led, depth=50)
    for i in range(40):
        pipeline.handle(_produce(led, b"v%d" % i), 0.0)
    assert pipeline.waiting == 40 and len(checks) == 40
    led.outcome(_follower_fetch(led, 40))
    assert len(answered) == 40 and len(checks) == 80
