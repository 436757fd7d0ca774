"""A follower dropped from an ISR while caught up comes back through its fetch session
even when nothing is appended (found by the slow-disk fault: a stalled leader shrank its
ISR to itself; with min.insync.replicas=2 every acks=all write was then refused, the log
never grew, the followers' incremental fetches never named the partition again, and the
ISR stayed shrunk until a restart). In process, counted, never timed."""

from __future__ import annotations

from broker.protocol.apis import FETCH
from tests.helpers.server_requests import fetch_body
from tests.server.conftest import lead

FOLLOWER = 1  # the follower of t-0 in the `led` fixture (tests/server/conftest.py)


class WrittenAtOnce:
    """The ISR writer of a cluster, without ZooKeeper: each change applied as written."""

    def __init__(self) -> None:
        self.written: list[tuple[int, ...]] = []

    def write(self, partition, isr) -> None:
        self.written.append(tuple(isr))
        partition.apply_isr(isr, partition.zk_version + 1)


def _fetch(broker, session_id: int, epoch: int, named: bool) -> dict:
    body = {**fetch_body("t", 0, max_wait_ms=0), "replica_id": FOLLOWER}
    body.update(session_id=session_id, session_epoch=epoch)
    if not named:
        body["topics"] = []
    return broker.call(FETCH, 11, body)


def test_a_caught_up_follower_dropped_from_the_isr_comes_back_by_its_session(led):
    replicas = led.state.replicas
    writer = replicas.isr_writer = WrittenAtOnce()
    partition = replicas.get("t", 0)
    session_id = _fetch(led, 0, 0, named=True)["session_id"]  # at the log end: caught up
    assert session_id != 0 and partition.isr == (0, FOLLOWER)

    # The leader stalls past replica.lag.time.max.ms, then looks at its ISRs first.
    led.clock.now += led.state.config["replica.lag.time.max.ms"] + 1
    replicas.shrink_isrs(led.state.config["replica.lag.time.max.ms"])
    assert partition.isr == (0,) and writer.written == [(0,)]

    # Nothing is appended: the follower's next incremental fetch names nothing.
    _fetch(led, session_id, 1, named=False)
    assert partition.isr == (0, FOLLOWER) and writer.written == [(0,), (0, FOLLOWER)]
    # Back in: later fetches look at the partition no more.
    assert replicas.out_of_sync[FOLLOWER] == set()
    _fetch(led, session_id, 2, named=False)
    assert writer.written == [(0,), (0, FOLLOWER)]


def test_a_follower_the_controller_dropped_comes_back_by_its_session(led):
    """The race of a broker restart: the follower fetched (and was counted) before the
    leader heard of the controller's new epoch without it, which resets what the leader
    knows of its followers; the follower's offset does not move after that."""
    replicas = led.state.replicas
    writer = replicas.isr_writer = WrittenAtOnce()
    partition = replicas.get("t", 0)
    session_id = _fetch(led, 0, 0, named=True)["session_id"]
    lead(led, leader_epoch=2, isr=(0,))
    assert partition.isr == (0,) and replicas.out_of_sync[FOLLOWER] == {("t", 0)}
    _fetch(led, session_id, 1, named=False)
    assert partition.isr == (0, FOLLOWER) and writer.written == [(0, FOLLOWER)]
    assert replicas.out_of_sync[FOLLOWER] == set()


def test_a_state_read_before_the_leaders_own_shrink_does_not_undo_it(led):
    """Found by the fault campaign (kill-controller, kill-coordinator; docs/faults.md,
    F12): a controller taking over sends every partition's state as it read it, here
    read before the leader shrank its ISR itself (the same epoch, an older znode
    version). Taken, it put the dead follower back into the leader's ISR while ZooKeeper
    held the shrunk one, so the follower, restarted and caught up, was never added back."""
    replicas = led.state.replicas
    writer = replicas.isr_writer = WrittenAtOnce()
    partition = replicas.get("t", 0)
    _fetch(led, 0, 0, named=True)
    led.clock.now += led.state.config["replica.lag.time.max.ms"] + 1
    replicas.shrink_isrs(led.state.config["replica.lag.time.max.ms"])
    assert partition.isr == (0,) and partition.zk_version == 2

    lead(led, leader_epoch=1, isr=(0, FOLLOWER), zk_version=1)  # the takeover's stale read
    assert partition.isr == (0,) and partition.zk_version == 2

    _fetch(led, 0, 0, named=True)  # the follower, restarted: a new session, caught up
    assert partition.isr == (0, FOLLOWER) and writer.written == [(0,), (0, FOLLOWER)]
