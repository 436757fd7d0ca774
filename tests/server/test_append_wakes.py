"""Issue 23, counted: what an acks=all append wakes. A follower's parked fetch is answered
by the append itself (the clock never moves, so never by its max wait); a consumer's
parked fetch is not looked at until the high watermark moves (it reads below it), then
answered; each acks=all produce is checked once when it parks and once when the follower's
fetch moves the high watermark. In process, over the real broker state."""

from __future__ import annotations

import pytest

from broker.protocol.apis import FETCH, PRODUCE
from broker.server.dispatch import Respond, Wait
from broker.server.handlers.fetch import DelayedFetch
from broker.server.handlers.produce import DelayedProduce
from tests.helpers.server_requests import fetch_body, produce_body, values

FOLLOWER = 1  # the follower of t-0 in the `led` fixture (tests/server/conftest.py)


@pytest.fixture
def checks(monkeypatch):
    """Every try_complete of a DelayedFetch or DelayedProduce, by operation."""
    seen: list = []
    for cls in (DelayedFetch, DelayedProduce):
        real = cls.try_complete
        monkeypatch.setattr(
            cls,
            "try_complete",
            lambda self, now, real=real: (seen.append(self), real(self, now))[1],
        )
    return seen


def _parked_fetch(broker, offset: int, replica_id: int, session_epoch: int) -> Wait:
    body = {
        **fetch_body("t", offset, max_wait_ms=500),
        "replica_id": replica_id,
        "session_epoch": session_epoch,
    }
    outcome = broker.send(FETCH, 11, body)
    assert isinstance(outcome, Wait), outcome
    return outcome


def _produce(broker, value: bytes) -> Wait:
    outcome = broker.send(PRODUCE, 8, produce_body("t", values(value), acks=-1))
    assert isinstance(outcome, Wait), outcome
    return outcome


def _records(broker, wait: Wait) -> int:
    answer = wait.respond(wait.operation.result)
    assert isinstance(answer, Respond)
    (partition,) = broker.decode(FETCH, 11, answer)["responses"][0]["partitions"]
    return len(partition["records"] or b"")


@pytest.mark.parametrize("consumer_epoch", [0, -1], ids=["consumer-session", "consumer-no-session"])
@pytest.mark.parametrize("session_epoch", [0, -1], ids=["follower-session", "follower-no-session"])
def test_an_append_answers_the_follower_at_once_and_leaves_the_consumer_until_the_hw_moves(
    led, checks, session_epoch, consumer_epoch
):
    follower = _parked_fetch(led, 0, FOLLOWER, session_epoch)
    consumer = _parked_fetch(led, 0, -1, consumer_epoch)
    assert checks.count(consumer.operation) == 1  # its own first look

    produces = [_produce(led, b"v0")]
    assert follower.operation.completed  # by the append: the clock did not move
    assert _records(led, follower) > 0
    for i in range(1, 5):
        produces.append(_produce(led, b"v%d" % i))
    # Five appends, the high watermark unmoved: the consumer's fetch was never looked at.
    assert checks.count(consumer.operation) == 1 and not consumer.operation.completed
    assert not any(p.operation.completed for p in produces)

    # The follower's next fetch says it has all five: the high watermark moves.
    body = {**fetch_body("t", 5, max_wait_ms=0), "replica_id": FOLLOWER}
    assert isinstance(led.send(FETCH, 11, body), Respond)
    assert consumer.operation.completed and checks.count(consumer.operation) == 2
    assert _records(led, consumer) > 0
    assert all(p.operation.completed for p in produces)
    # Each produce: once when it parked, once when the high watermark passed it.
    assert [checks.count(p.operation) for p in produces] == [2] * 5
