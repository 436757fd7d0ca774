"""The broker's request handling in process, with no socket (as h11's tests drive h11):
request bytes in through `dispatch.handle_frame`, response bytes out, decoded back.

The broker state is the real one (`open_broker_state`: logs on disk, replica manager,
metadata, purgatory) on a hand-driven clock, so delayed operations expire exactly when
a test moves the clock.
"""

from __future__ import annotations

import asyncio
import struct
from pathlib import Path

from broker.cluster import BrokerRegistration, Endpoint
from broker.config.server import BrokerConfig
from broker.protocol.framing import decode_response, encode_request
from broker.records.region import FileRegion
from broker.server.broker import open_broker_state
from broker.server.dispatch import Close, NoResponse, Outcome, Respond, Wait, handle_frame
from broker.server.handlers.base import TaskOperation
from broker.server.request import Session
from tests.helpers.clock import Clock


def response_bytes(parts: list) -> bytes:
    """A response frame's bytes, size prefix checked and removed, file regions read."""
    data = b"".join(p.read() if isinstance(p, FileRegion) else bytes(p) for p in parts)
    (size,) = struct.unpack_from(">i", data)
    assert size == len(data) - 4, "size prefix does not match the frame"
    return data[4:]


class InProcessBroker:
    def __init__(self, log_dir: Path, **overrides: str) -> None:
        self.clock = Clock(1_700_000_000_000)
        raw = {"broker.id": "0", "log.dirs": str(log_dir), **overrides}
        self.state = open_broker_state(BrokerConfig.from_mapping(raw), self.clock)
        # Requests that need the event loop (topic administration) run on this one.
        self.loop = asyncio.new_event_loop()
        self.state.spawn = self.loop.create_task
        # What the broker does once its listener is bound.
        self.state.admin.start(BrokerRegistration(0, (Endpoint("PLAINTEXT", "127.0.0.1", 9092),)))
        self.session = Session(client_host="127.0.0.1", client_port=50000)
        self._correlation = 0

    def frame(self, api_key: int, version: int, body: dict, client_id: str = "test") -> bytes:
        """A request frame as a client sends it, without its size prefix."""
        self._correlation += 1
        return encode_request(api_key, version, self._correlation, client_id, body)[4:]

    def outcome(self, frame: bytes) -> Outcome:
        return handle_frame(self.state, self.session, frame)

    def send(self, api_key: int, version: int, body: dict) -> Outcome:
        return self.outcome(self.frame(api_key, version, body))

    def call(self, api_key: int, version: int, body: dict) -> dict:
        """The decoded response to one request, answered at once or by work on the loop
        (not by a purgatory: those wait for events the test causes)."""
        outcome = self.send(api_key, version, body)
        if isinstance(outcome, Wait) and isinstance(outcome.operation, TaskOperation):
            outcome = self.run_until_answered(outcome)
        assert isinstance(outcome, Respond), outcome
        correlation_id, body = decode_response(api_key, version, response_bytes(outcome.parts))
        assert correlation_id == self._correlation
        return body

    def decode(self, api_key: int, version: int, outcome: Respond) -> dict:
        return decode_response(api_key, version, response_bytes(outcome.parts))[1]

    def run_until_answered(self, wait: Wait) -> Respond | Close:
        done = self.loop.create_future()
        wait.operation.add_done_callback(lambda result: done.done() or done.set_result(result))
        return wait.respond(self.loop.run_until_complete(asyncio.wait_for(done, 30)))

    def close(self) -> None:
        self.state.replicas.logs.close()
        self.loop.close()

    def answer_of(self, wait: Wait) -> Respond | Close | None:
        """What the connection would send for a waiting request, or None if still waiting."""
        if not wait.operation.completed:
            return None
        return wait.respond(wait.operation.result)

    def advance(self, ms: int) -> int:
        """Move the clock and let the purgatories expire what is due (as the broker's
        timer does). Returns how many operations expired."""
        self.clock.now += ms
        return sum(p.expire_due(self.clock.now) for p in self.state.purgatories())


__all__ = ["Close", "InProcessBroker", "NoResponse", "Respond", "Wait", "response_bytes"]
