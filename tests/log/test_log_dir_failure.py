"""An I/O error in a log dir takes the whole dir offline (docs/contracts/log.md, "Log
directory failure"): its partitions answer KAFKA_STORAGE_ERROR, nothing that failed was
acknowledged, and a broker left with no log dir stops. The OSError is injected."""

from __future__ import annotations

import errno

import pytest

from broker.log import manager, segment
from broker.log.log import KafkaStorageError
from broker.protocol.apis import (
    DESCRIBE_LOG_DIRS,
    DESCRIBE_PRODUCERS_API,
    OFFSET_FOR_LEADER_EPOCH_API,
    PRODUCE,
)
from broker.protocol.errors import ErrorCode
from broker.records.batch import iter_records
from tests.helpers.inprocess_broker import InProcessBroker
from tests.helpers.server_requests import (
    create,
    fetch,
    list_offsets,
    produce,
    produce_body,
    values,
)


def _disk_full(*args, **kwargs):
    raise OSError(errno.ENOSPC, "No space left on device")


@pytest.fixture
def two_dirs(tmp_path):
    b = InProcessBroker(tmp_path / "a", **{"log.dirs": f"{tmp_path / 'a'},{tmp_path / 'b'}"})
    b.halted = 0
    b.state.replicas.halt = lambda: setattr(b, "halted", b.halted + 1)
    yield b
    b.close()


def _dir_of(broker, topic, partition):
    return broker.state.replicas.get(topic, partition).log.dir.parent


def test_a_failed_append_takes_its_dir_offline_and_keeps_what_was_acknowledged(
    two_dirs, monkeypatch, caplog
):
    b = two_dirs
    create(b, "t", partitions=2)  # one partition in each dir
    failing, other = (0, 1)
    assert _dir_of(b, "t", failing) != _dir_of(b, "t", other)
    assert produce(b, "t", values(b"kept"), partition=failing)["error_code"] == 0
    with monkeypatch.context() as m:
        m.setattr(segment, "write_all", _disk_full)
        m.setattr(segment, "_pwrite_all", _disk_full)
        refused = produce(b, "t", values(b"lost"), partition=failing)
    assert refused["error_code"] == ErrorCode.KAFKA_STORAGE_ERROR
    dead = _dir_of(b, "t", failing)
    errors = [r for r in caplog.records if r.levelname == "ERROR"]
    assert len(errors) == 1 and str(dead) in errors[0].getMessage()
    assert "No space left" in errors[0].getMessage()
    # The disk has room again: the dir stays offline until a restart.
    again = produce(b, "t", values(b"again"), partition=failing)
    assert again["error_code"] == ErrorCode.KAFKA_STORAGE_ERROR
    assert fetch(b, "t", 0, partition=failing)["error_code"] == ErrorCode.KAFKA_STORAGE_ERROR
    # The other dir serves on; the broker does not stop while it has one.
    assert produce(b, "t", values(b"fine"), partition=other)["error_code"] == 0
    assert b.halted == 0
    dirs = b.call(DESCRIBE_LOG_DIRS, 1, {"topics": None})["results"]
    codes = {d["log_dir"]: d["error_code"] for d in dirs}
    assert codes[str(dead.resolve())] == ErrorCode.KAFKA_STORAGE_ERROR
    assert codes[str(_dir_of(b, "t", other).resolve())] == ErrorCode.NONE
    # What was acknowledged is there after a restart (recovery cut the failed write).
    log_dirs = b.state.config["log.dirs"]
    b.close()
    reopened = InProcessBroker(dead, **{"log.dirs": log_dirs})
    try:
        got = fetch(reopened, "t", 0, partition=failing)
        assert [r.value for r in iter_records(got["records"], 0)] == [b"kept"]
    finally:
        reopened.close()
    b.close = lambda: None  # closed above


def test_a_failed_checkpoint_in_the_background_takes_its_dir_offline(two_dirs, monkeypatch):
    b = two_dirs
    create(b, "t")
    produce(b, "t", values(b"x"))
    failing = b.state.replicas.get("t", 0).log
    monkeypatch.setattr(manager, "write_checkpoint", _disk_full)
    b.state.replicas.logs.checkpoint(b.state.replicas.high_watermarks())
    assert b.state.replicas.logs.offline_dirs == {failing.dir.parent}
    assert fetch(b, "t", 0)["error_code"] == ErrorCode.KAFKA_STORAGE_ERROR
    # Every read of the partition answers so, as Kafka's getPartitionOrError, not only Fetch.
    assert list_offsets(b, "t", -1)["error_code"] == ErrorCode.KAFKA_STORAGE_ERROR
    epochs = b.call(OFFSET_FOR_LEADER_EPOCH_API.key, 3, {"replica_id": -1, "topics": [
        {"topic": "t", "partitions": [{"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}]}
    ]})  # fmt: skip
    assert epochs["topics"][0]["partitions"][0]["error_code"] == ErrorCode.KAFKA_STORAGE_ERROR
    producers = b.call(
        DESCRIBE_PRODUCERS_API.key, 0, {"topics": [{"name": "t", "partition_indexes": [0]}]}
    )
    assert producers["topics"][0]["partitions"][0]["error_code"] == ErrorCode.KAFKA_STORAGE_ERROR
    with pytest.raises(KafkaStorageError):
        failing.read(0, 100)
    assert b.halted == 0


def test_the_last_log_dir_failing_stops_the_broker(tmp_path, monkeypatch, caplog):
    b = InProcessBroker(tmp_path / "only")
    halted = []
    b.state.replicas.halt = lambda: halted.append(True)
    try:
        create(b, "t")
        monkeypatch.setattr(segment, "write_all", _disk_full)
        monkeypatch.setattr(segment, "_pwrite_all", _disk_full)
        outcome = b.send(PRODUCE, 8, produce_body("t", values(b"x"), acks=1))
        assert (
            b.decode(PRODUCE, 8, outcome)["responses"][0]["partition_responses"][0]["error_code"]
            == ErrorCode.KAFKA_STORAGE_ERROR
        )
        assert halted == [True]
        assert "all log dirs" in caplog.text
    finally:
        b.close()
