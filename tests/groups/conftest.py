"""Consumer groups against real broker processes with real clients (confluent-kafka,
kafka-python, kcat). A module shares one broker (`group_broker`) whose group settings let
tests see rebalances quickly: members starting together still meet in one generation
(a short initial rebalance delay), and sessions may be as short as a second. Tests that
restart or kill brokers own theirs and are marked `slow`."""

from __future__ import annotations

import pytest

from broker.processes import BrokerProcess

# A short initial delay still lets members started together join one generation.
GROUP_SETTINGS = {
    "group.initial.rebalance.delay.ms": "300",
    "group.min.session.timeout.ms": "1000",
}


@pytest.fixture(scope="module")
def group_broker(tmp_path_factory):
    """One broker shared by a test module, with GROUP_SETTINGS. Create topics and groups of
    the test's own (`tests.helpers.cluster.fresh`); do not stop or kill it."""
    with BrokerProcess(tmp_path_factory.mktemp("groups") / "logs", GROUP_SETTINGS) as b:
        yield b


@pytest.fixture
def group_settings() -> dict[str, str]:
    """GROUP_SETTINGS, for tests that start brokers of their own."""
    return dict(GROUP_SETTINGS)
