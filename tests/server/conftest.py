from __future__ import annotations

import pytest

from broker.protocol.apis import LEADER_AND_ISR
from broker.protocol.errors import ErrorCode
from tests.helpers.inprocess_broker import InProcessBroker
from tests.helpers.server_requests import create


@pytest.fixture
def broker(tmp_path):
    b = InProcessBroker(tmp_path / "logs")
    yield b
    b.close()


@pytest.fixture
def make_broker(tmp_path):
    made = []

    def make(**overrides):
        b = InProcessBroker(tmp_path / f"logs-{len(made)}", **overrides)
        made.append(b)
        return b

    yield make
    for b in made:
        b.close()


# A single broker refuses every controller epoch below this one (broker/server/modes/local.py).
EPOCH = 2**31 - 1


def lead(broker, leader_epoch: int = 1, isr=(0, 1), zk_version: int | None = None) -> None:
    """A LeaderAndIsr making this broker (0) leader of t-0, replicas [0, 1], at
    `leader_epoch` with `isr` (the state znode at `zk_version`, by default the epoch)."""
    state = {
        "partition_index": 0, "controller_epoch": EPOCH, "leader": 0,
        "leader_epoch": leader_epoch, "isr": list(isr),
        "zk_version": leader_epoch if zk_version is None else zk_version,
        "replicas": [0, 1], "adding_replicas": [], "removing_replicas": [], "is_new": False,
    }  # fmt: skip
    body = {
        "controller_id": 1, "controller_epoch": EPOCH, "broker_epoch": -1,
        "topic_states": [{"topic_name": "t", "partition_states": [state]}],
        "live_leaders": [{"broker_id": 0, "host_name": "127.0.0.1", "port": 9092}],
    }  # fmt: skip
    assert broker.call(LEADER_AND_ISR, 3, body)["error_code"] == ErrorCode.NONE


@pytest.fixture
def led(broker):
    """Topic t, partition 0 led here (broker 0) with broker 1 in its ISR."""
    create(broker, "t")
    lead(broker)
    return broker
