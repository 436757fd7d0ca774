"""Metadata's partition entries: which leader and error code a client is told, from the
live brokers and those reachable on the request's listener (worked out once per
request, broker/server/handlers/metadata.py)."""

from __future__ import annotations

import pytest

from broker.protocol.errors import ErrorCode
from broker.server.handlers.metadata import _partition_entry
from broker.server.metadata import PartitionState

LIVE = {1: object(), 2: object()}  # broker 2 has no endpoint on the request's listener
REACHABLE = frozenset({1})


@pytest.mark.parametrize(
    ("leader", "told", "code"),
    [
        (1, 1, ErrorCode.NONE),
        (2, -1, ErrorCode.LISTENER_NOT_FOUND),
        (3, -1, ErrorCode.LEADER_NOT_AVAILABLE),  # not a live broker
        (-1, -1, ErrorCode.LEADER_NOT_AVAILABLE),  # no leader
    ],
)
def test_the_leader_a_client_is_told(leader, told, code):
    state = PartitionState("t", 4, leader, 7, (1, 2, 3), (1, 2), (3,))
    assert _partition_entry(state, LIVE, REACHABLE) == {
        "error_code": code,
        "partition_index": 4,
        "leader_id": told,
        "leader_epoch": 7,
        "replica_nodes": (1, 2, 3),
        "isr_nodes": (1, 2),
        "offline_replicas": (3,),
    }
