"""Producer-id expiry at the partitions (producer.id.expiration.ms, KIP-854): the pure
decision, its survival through a snapshot, and the broker's duty using the key in force
(dynamic, cluster-wide), not the coordinator's transactional.id.expiration.ms."""

from __future__ import annotations

import pytest

from broker.config.server import SERVER_CONFIG
from broker.protocol.apis import INCREMENTAL_ALTER_CONFIGS
from broker.records.header import TRANSACTIONAL, BatchHeader
from broker.server.duties import Duties
from broker.server.producer_state import (
    ProducerStateTable,
    decode_snapshot,
    encode_snapshot,
    is_expired,
)
from tests.helpers.server_requests import create, produce, values

DAY = 86_400_000


@pytest.mark.parametrize(
    ("idle_ms", "in_transaction", "expired"),
    [
        (DAY - 1, False, False),
        (DAY, False, True),  # Kafka's bound is inclusive
        (DAY * 30, False, True),
        (DAY * 30, True, False),  # its marker is still to come: never expired
    ],
)
def test_the_expiry_decision(idle_ms, in_transaction, expired):
    assert is_expired(1_000, in_transaction, 1_000 + idle_ms, DAY) is expired


def test_the_key_is_kafkas_and_separate_from_the_coordinators():
    key = SERVER_CONFIG.keys["producer.id.expiration.ms"]
    assert (key.type, key.default, key.dynamic) == ("int", DAY, True)
    assert SERVER_CONFIG.keys["transactional.id.expiration.ms"].default == 7 * DAY


def _header(pid: int, offset: int, txn: bool) -> BatchHeader:
    attributes = TRANSACTIONAL if txn else 0
    return BatchHeader(offset, 0, 0, 2, 0, attributes, 0, 0, 0, pid, 0, offset, 1)


def test_last_seen_survives_a_snapshot_so_expiry_survives_a_restart():
    table = ProducerStateTable()
    table.record(_header(1, 0, txn=False), 0, now_ms=1_000)  # idle since 1 000
    table.record(_header(2, 1, txn=False), 1, now_ms=DAY)  # idle since a day later
    table.record(_header(3, 2, txn=True), 2, now_ms=0)  # transaction still open
    loaded = decode_snapshot(encode_snapshot(table))
    assert {pid: e.last_seen_ms for pid, e in loaded.producers.items()} == {
        1: 1_000, 2: DAY, 3: 0
    }  # fmt: skip
    assert sorted(loaded.expire(now_ms=DAY + 1_000, expiration_ms=DAY)) == [1]
    assert set(loaded.producers) == {2, 3}


def _idempotent(seq: int) -> bytes:
    return values(b"v", producer_id=7, producer_epoch=0, base_sequence=seq)


def test_the_duty_forgets_an_idle_producer_after_the_key_in_force(make_broker):
    broker = make_broker(**{"producer.id.expiration.check.interval.ms": "1000"})
    create(broker, "t")
    assert produce(broker, "t", _idempotent(0))["error_code"] == 0
    producers = broker.state.replicas.get("t", 0).producers
    duties = Duties(broker.state.config, broker.state, broker.clock.now)
    broker.clock.now += DAY - 1_000
    duties.run(broker.clock.now)
    assert 7 in producers.producers  # a day not yet over (the 7-day key plays no part)
    # Lowered cluster-wide while running (dynamic, as Kafka's).
    body = {
        "resources": [{"resource_type": 4, "resource_name": "", "configs": [
            {"name": "producer.id.expiration.ms", "config_operation": 0, "value": "60000"}
        ]}],
        "validate_only": False,
    }  # fmt: skip
    (answer,) = broker.call(INCREMENTAL_ALTER_CONFIGS, 1, body)["responses"]
    assert answer["error_code"] == 0, answer
    broker.clock.now += 1_000
    duties.run(broker.clock.now)
    assert 7 not in producers.producers
    # Forgotten: its next batch starts afresh wherever its sequence is (Kafka's rule).
    assert produce(broker, "t", _idempotent(5))["error_code"] == 0
