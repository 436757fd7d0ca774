"""A connection's requests from frame to answer, in request order -- no I/O here.

Kafka mutes a channel while one of its requests is in flight. Here a connection may read
ahead instead: while an earlier request waits in a purgatory whose state change was made
when it was handled (an acks=all Produce already appended, a Fetch parked: see
`Wait.read_ahead` in dispatch.py), the next request is decoded and handled, up to `depth`
requests in flight. Answers still leave strictly in request order: an answer ready early
waits behind the earlier ones. So an unbatched acks=all producer has many requests
appended while one replication round trip is under way, and the follower's next fetch
acknowledges all of them at once (a group commit) instead of one request per round trip
(docs/contracts/wire-protocol.md, "Connections and frames").

A wait for asynchronous work (ZooKeeper writes, the controller, a group's rebalance) holds
every later request until it is answered, as muting would: a later request may depend on
what that work changes. A request answered by closing the connection (a frame that does
not decode, a failed authentication) stops the pipeline: nothing after it is handled, and
the answers before it are sent first.

The network layer feeds frames while `accepts()`, sends what `next_answered()` gives, and is
told through `on_answer` when a waiting request's answer became ready.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from broker.server.context import BrokerContext
from broker.server.dispatch import Close, Outcome, Respond, Wait, handle_frame
from broker.server.request import Session


@dataclass(eq=False)
class InFlight:
    """One request on its way: its API key and version (the frame's first 4 bytes, all the
    metrics read: the frame itself is not kept), its outcome (a Wait until its answer is
    ready), and the phases of its latency (`time.perf_counter()` readings; broker/metrics)."""

    api: bytes
    outcome: Outcome
    received: float
    started: float
    handled: float
    answered: float | None = None  # when its answer became ready


class Pipeline:
    """The requests of one connection between handling and sending."""

    def __init__(
        self,
        ctx: BrokerContext,
        session: Session,
        depth: int,
        on_answer: Callable[[], None] = lambda: None,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.ctx = ctx
        self.session = session
        self.depth = depth
        self.on_answer = on_answer
        self._clock = clock
        self._queue: deque[InFlight] = deque()
        # Requests waiting for their answer; of them, those waiting for asynchronous work
        # (later requests must not be handled until they are answered).
        self.waiting = 0
        self._barriers = 0
        # Why no further request is handled (the connection closes once the answers before
        # it are sent); None while requests are taken.
        self.stopped: str | None = None

    def __len__(self) -> int:
        """Requests handled and not yet sent."""
        return len(self._queue)

    def accepts(self) -> bool:
        """Whether the next frame may be handled now."""
        return self.stopped is None and self._barriers == 0 and len(self._queue) < self.depth

    def handle(self, frame: bytes, received: float) -> InFlight:
        """Handle `frame` (the caller checked `accepts()`) and queue its answer."""
        assert self.accepts()
        started = self._clock()
        outcome = handle_frame(self.ctx, self.session, frame)
        entry = InFlight(frame[:4], outcome, received, started, self._clock())
        self._queue.append(entry)
        if isinstance(outcome, Wait):
            self.waiting += 1
            if not outcome.read_ahead:
                self._barriers += 1
            outcome.operation.add_done_callback(lambda result: self._answered(entry, result))
        else:
            entry.answered = entry.handled
            self._note_stop(outcome)
        return entry

    def next_answered(self) -> InFlight | None:
        """Remove and return the head request if its answer is ready."""
        queue = self._queue
        if queue and queue[0].answered is not None:
            return queue.popleft()
        return None

    def _answered(self, entry: InFlight, result) -> None:
        wait = entry.outcome
        assert isinstance(wait, Wait)
        entry.outcome = wait.respond(result)
        entry.answered = self._clock()
        self.waiting -= 1
        if not wait.read_ahead:
            self._barriers -= 1
        self._note_stop(entry.outcome)
        self.on_answer()

    def _note_stop(self, outcome: Outcome) -> None:
        if self.stopped is not None:
            return
        if isinstance(outcome, Close):
            self.stopped = outcome.reason
        elif isinstance(outcome, Respond) and outcome.close is not None:
            self.stopped = outcome.close
