"""The in-process broker the coordinator tests share: topics "t" (4 partitions) and "u"
(1), the offsets topic created and loaded, a hand clock (`broker.advance`)."""

from __future__ import annotations

import pytest

from tests.helpers.groups import SETTINGS, ready
from tests.helpers.inprocess_broker import InProcessBroker
from tests.helpers.server_requests import create


@pytest.fixture
def broker(tmp_path):
    b = InProcessBroker(tmp_path / "logs", **SETTINGS)
    create(b, "t", partitions=4)
    create(b, "u", partitions=1)
    ready(b)
    yield b
    b.close()
