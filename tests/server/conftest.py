from __future__ import annotations

import pytest

from tests.helpers.inprocess_broker import InProcessBroker


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
