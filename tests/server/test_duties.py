"""The broker's timers (broker/server/duties.py) count their work: an idle tick rewrites
no checkpoint and syncs nothing; producer ids are searched on their own interval."""

from __future__ import annotations

import os

from broker.server.duties import Duties
from tests.helpers.server_requests import create, produce, values

CHECKPOINT_WRITES = "kafka_log_checkpoint_writes_total"


def checkpoint_writes(broker, file: str) -> float:
    sample = broker.state.metrics.registry.get_sample_value(CHECKPOINT_WRITES, {"file": file})
    return sample or 0.0


def test_idle_ticks_rewrite_no_checkpoint_and_sync_nothing(make_broker, monkeypatch):
    broker = make_broker(**{"metrics.port": "0"})
    create(broker, "t", partitions=20)
    duties = Duties(broker.state.config, broker.state, broker.clock.now)
    broker.clock.now += 5_000
    duties.run(broker.clock.now)  # the first high-watermark checkpoint
    assert checkpoint_writes(broker, "replication-offset-checkpoint") == 1
    fsyncs = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (fsyncs.append(fd), real(fd))[1])
    before = {f: checkpoint_writes(broker, f) for f in ("replication-offset-checkpoint",
              "recovery-point-offset-checkpoint", "log-start-offset-checkpoint")}  # fmt: skip
    for _ in range(30):  # 30 s idle: six checkpoint intervals
        broker.clock.now += 1_000
        duties.run(broker.clock.now)
    assert fsyncs == []
    assert {f: checkpoint_writes(broker, f) for f in before} == before
    # A produce moves a high watermark: the next checkpoint writes that file, once.
    produce(broker, "t", values(b"a"), partition=3)
    for _ in range(10):
        broker.clock.now += 1_000
        duties.run(broker.clock.now)
    hw = before["replication-offset-checkpoint"]
    assert checkpoint_writes(broker, "replication-offset-checkpoint") == hw + 1


def test_producer_ids_are_searched_on_their_interval_not_every_tick(make_broker):
    broker = make_broker(**{"producer.id.expiration.check.interval.ms": "60000"})
    create(broker, "t", partitions=5)
    duties = Duties(broker.state.config, broker.state, broker.clock.now)
    for _ in range(59):
        broker.clock.now += 1_000
        duties.run(broker.clock.now)
    assert duties.producer_expiry_runs == 0
    broker.clock.now += 1_000
    duties.run(broker.clock.now)
    assert duties.producer_expiry_runs == 1


def test_the_default_interval_is_kafkas(broker):
    assert broker.state.config["producer.id.expiration.check.interval.ms"] == 600_000
