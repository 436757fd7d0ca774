"""Transactions across a leader change: followers copy the markers and build the same
open transactions and aborted index, so a new leader answers read_committed readers as
the old one did and takes the markers that end what is still open."""

from __future__ import annotations

import pytest
from confluent_kafka.admin import AdminClient

from tests.helpers.cluster import FAST_FAILOVER, create_topic, fresh, in_sync, leaders, wait_for
from tests.helpers.server_requests import (
    RAW_TXN_SETTINGS,
    Wire,
    produce,
    txn_records,
    values,
    write_marker,
)
from tests.transactions.test_log_read_committed import kafka_python, producer_id

pytestmark = [pytest.mark.slow, pytest.mark.clients]


def test_a_new_leader_has_the_aborted_index_and_the_open_transaction(cluster_factory):
    cluster = cluster_factory(3, overrides={**FAST_FAILOVER, **RAW_TXN_SETTINGS})
    topic = fresh("txn-failover")
    leader = create_topic(cluster, topic)[0][0]
    wire = Wire(cluster.broker(leader).bootstrap)
    aborted, still_open = producer_id(wire), producer_id(wire)
    produce(wire, topic, values(b"c0"))  # 0
    produce(wire, topic, txn_records(aborted, b"a1", b"a2"))  # 1-2
    assert write_marker(wire, aborted, topic, commit=False) == [0]  # 3: acks=all
    produce(wire, topic, values(b"c1"))  # 4
    produce(wire, topic, txn_records(still_open, b"open"))  # 5, open: the LSO
    produce(wire, topic, values(b"c2"))  # 6
    wire.close()
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    wait_for(lambda: in_sync(admin, topic, 3), "every replica in sync")

    cluster.kill(leader)
    found = wait_for(lambda: (p := leaders(admin, topic)) and p[0][0] != leader and p, "a leader")
    new_leader = found[0][0]
    got, position, end = kafka_python(cluster.bootstrap, "read_committed", topic)
    assert (got, position, end) == ([b"c0", b"c1"], 5, 5)
    index = cluster.broker(new_leader).log_dir / f"{topic}-0" / "00000000000000000000.txnindex"
    assert index.exists()

    # The new leader knows the open transaction: its ABORT lets readers past it.
    wire = Wire(cluster.broker(new_leader).bootstrap)
    assert write_marker(wire, still_open, topic, commit=False) == [0]
    wire.close()
    got, _, end = kafka_python(cluster.bootstrap, "read_committed", topic)
    assert (got, end) == ([b"c0", b"c1", b"c2"], 8)
