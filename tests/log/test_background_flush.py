"""Flushes on the log dir's flusher thread (broker/log/README.md, "Flushes and the event
loop"): an fsync that does not return holds neither the event loop nor the recovery
point's other users, and the recovery point moves only once the fsync returned."""

from __future__ import annotations

import asyncio
import errno
import os
import threading

from broker.log import LogConfig, LogManager
from broker.log.checkpoint import read_checkpoint
from tests.helpers.clock import Clock
from tests.helpers.log_batches import append, batch

RECOVERY = "recovery-point-offset-checkpoint"


class HeldFsync:
    """An fsync that waits until released (a disk that does not answer), or fails."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.entered = threading.Event()
        self.calls = 0
        self.error: int | None = None

    def __call__(self, fd: int) -> None:
        self.calls += 1
        self.entered.set()
        self.release.wait()
        if self.error is not None:
            raise OSError(self.error, os.strerror(self.error))
        os.fsync(fd)


def background(tmp_path, fsync, **config) -> LogManager:
    m = LogManager(
        [tmp_path], LogConfig(**config), now_ms=Clock(), background_flush=True, fsync=fsync
    )
    m.load()
    return m


async def until(condition) -> int:
    """Let the loop run until `condition()`; returns how many turns it took."""
    turns = 0
    while not condition():
        await asyncio.sleep(0.001)
        turns += 1
        assert turns < 5_000, "never happened"
    return turns


def test_the_loop_runs_while_an_fsync_hangs_and_the_recovery_point_waits(tmp_path):
    held = HeldFsync()

    async def scenario():
        m = background(tmp_path, held)
        log = m.create("t", 0)
        durable = []
        m.on_durable = durable.append
        append(log, batch(3))
        log.flush()  # returns at once: the fsync runs on the flusher thread
        await asyncio.get_running_loop().run_in_executor(None, held.entered.wait)
        # The loop answers other work while the fsync is held...
        answered = await asyncio.wait_for(asyncio.sleep(0, result="pong"), 5)
        assert answered == "pong"
        # ...and nothing claims durability yet: no recovery point, no checkpoint.
        assert log.recovery_point == 0 and log.flush_pending(3)
        m.checkpoint()  # queued behind the flush on the same thread
        await asyncio.sleep(0.01)
        assert read_checkpoint(tmp_path / RECOVERY).get(("t", 0)) is None
        log.flush()  # already covered by the one in flight: not queued again
        held.release.set()
        await until(lambda: log.recovery_point == 3)
        assert not log.flush_pending(3) and durable == [("t", 0)]
        await until(lambda: read_checkpoint(tmp_path / RECOVERY).get(("t", 0)) == 0)
        m.checkpoint()
        await until(lambda: read_checkpoint(tmp_path / RECOVERY).get(("t", 0)) == 3)
        m.close()
        return held.calls

    # One job: the segment and the directories (the log's, then its log dir's).
    assert asyncio.run(scenario()) >= 1


def test_a_truncation_during_the_fsync_keeps_the_recovery_point(tmp_path):
    held = HeldFsync()

    async def scenario():
        m = background(tmp_path, held)
        log = m.create("t", 0)
        append(log, batch(2))
        append(log, batch(2))
        log.flush()
        await asyncio.get_running_loop().run_in_executor(None, held.entered.wait)
        log.truncate_to(2)  # a follower cutting its divergent tail meanwhile
        append(log, batch(5))  # new data at 2..6 the running fsync may not cover
        held.release.set()
        await until(lambda: not log.flush_pending(4) and log._flushes_running == 0)
        assert log.recovery_point == 0
        log.flush()  # the next flush covers the new data, then moves it
        await until(lambda: log.recovery_point == 7)
        m.close()

    asyncio.run(scenario())


def test_segments_deleted_during_the_fsync_are_synced_through_their_dups(tmp_path):
    held = HeldFsync()

    async def scenario():
        m = background(tmp_path, held, segment_bytes=200, retention_bytes=0)
        log = m.create("t", 0)
        for _ in range(4):
            append(log, batch(1, value_size=150))  # one segment each
        log.flush()
        await asyncio.get_running_loop().run_in_executor(None, held.entered.wait)
        assert log.delete_expired(10**12, high_watermark=4) == 4
        log.collect_deleted(2**62)  # closed and unlinked under the running job
        held.release.set()
        await until(lambda: log._flushes_running == 0)
        assert not log.offline and log.recovery_point == 4
        m.close()

    asyncio.run(scenario())


def test_an_fsync_error_takes_the_dir_offline_and_tells_the_waiters(tmp_path):
    held = HeldFsync()
    held.error = errno.EIO

    async def scenario():
        m = background(tmp_path, held, flush_interval_messages=1)
        log = m.create("t", 0)
        durable = []
        m.on_durable = durable.append
        append(log, batch(1))  # flush.messages=1: the append starts the flush
        assert log.flush_pending(1)
        held.release.set()
        await until(lambda: durable)
        assert log.offline and m.offline_dirs == {tmp_path}
        assert not log.flush_pending(1) and log.recovery_point == 0
        m.close()

    asyncio.run(scenario())


def test_follower_appends_flush_on_the_caller(tmp_path):
    """flush.messages on a follower stays synchronous: it tells its leader it holds the
    records (its next fetch) only once they are durable."""
    held = HeldFsync()
    held.release.set()

    async def scenario():
        m = background(tmp_path, held, flush_interval_messages=1)
        log = m.create("t", 0)
        from tests.helpers.log_batches import produced

        records, positions = produced(batch(2))
        log.append_as_follower(records, positions)
        assert log.recovery_point == 2 and held.calls == 0
        m.close()

    asyncio.run(scenario())


def test_a_produce_reaching_flush_messages_is_answered_after_its_fsync(tmp_path):
    """flush.messages=1 keeps its meaning (the append is fsynced before the Produce is
    answered) without the broker's loop waiting on the disk: the answer parks in the
    produce purgatory until the flusher thread returns."""
    from broker.protocol.apis import PRODUCE
    from tests.helpers.inprocess_broker import InProcessBroker, Respond, Wait
    from tests.helpers.server_requests import create, produce_body, values

    held = HeldFsync()
    broker = InProcessBroker(tmp_path / "logs", **{"log.flush.interval.messages": "1"})
    try:
        create(broker, "t")
        for flusher in broker.state.replicas.logs._flushers.values():
            flusher.fsync = held
        log = broker.state.replicas.logs.get("t", 0)

        async def produce(acks: int):
            return broker.send(PRODUCE, 8, produce_body("t", values(b"x"), acks=acks))

        for acks, end in ((1, 1), (-1, 2)):
            held.release.clear()
            outcome = broker.loop.run_until_complete(produce(acks))
            assert isinstance(outcome, Wait) and log.flush_pending(end)
            assert broker.answer_of(outcome) is None
            held.release.set()
            answer = broker.run_until_answered(outcome)
            assert isinstance(answer, Respond) and log.recovery_point == end
            body = broker.decode(PRODUCE, 8, answer)
            assert body["responses"][0]["partition_responses"][0]["error_code"] == 0
    finally:
        broker.close()
