"""librdkafka's mock cluster: an independent implementation of the Kafka protocol.

Everything else in the suite talks to our own broker, so a quirk our client and our
broker share would go unnoticed. The mock is written in C inside librdkafka, which
confluent-kafka ships: a confluent-kafka client created with `test.mock.num.brokers`
starts a cluster of that many brokers in this process, listening on loopback ports
(their addresses are in that client's metadata). The cluster lives as long as that
client, so `MockCluster` keeps it.

What the mock lacks, as far as our tests go (each test that needs one of these skips
on the mock only, naming the gap through `Kafka.lacks`):
- CreateTopics and DeleteTopics: topics are created by Metadata's auto-creation, and
  every topic then has `MOCK_PARTITIONS` partitions;
- ListOffsets by timestamp (it answers offset -1 for every time);
- duplicate detection for idempotent producers that are not transactional;
- long polls that wake on an append (an empty fetch is answered after max_wait_ms);
- LogAppendTime: it answers every Produce with log_append_time_ms 1234.
It also keeps only the newest 5 MiB of each partition, and answers a fetch with one
batch at most.

`Kafka` is what a test parametrized over both clusters gets: a bootstrap list, a way
to make a topic, and `lacks(reason)` to skip on the mock.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

import pytest

from broker.client.admin import AdminClient, NewTopic
from broker.client.cluster import ClusterMetadata
from broker.protocol.apis import PRODUCE

# librdkafka's mock creates every topic with this many partitions.
MOCK_PARTITIONS = 4
SPREAD_ATTEMPTS = 20

# Versions the mock advertises but answers in a layout other than Kafka's message JSON
# (so our client, reading Kafka's layout, cannot decode the answer): (api_key, version)
# -> what differs. Our client never picks them on its own (it asks the highest common
# version), but falls back to them if a broker refuses a higher one.
MOCK_WIRE_DEVIATIONS = {
    (PRODUCE, 5): "its Produce v5 answer lacks log_start_offset, which Kafka's has from v5",
}


class MockCluster:
    """A mock cluster of `brokers` brokers, open until close()."""

    def __init__(self, brokers: int = 3, timeout_s: float = 30.0):
        import confluent_kafka

        self.timeout_s = timeout_s
        self._client = confluent_kafka.Producer(
            {"test.mock.num.brokers": brokers, "bootstrap.servers": ""}
        )
        metadata = self._client.list_topics(timeout=timeout_s)
        self.brokers = {b.id: f"{b.host}:{b.port}" for b in metadata.brokers.values()}
        if len(self.brokers) != brokers:
            raise RuntimeError(f"mock cluster came up with {self.brokers}, not {brokers} brokers")
        self.bootstrap = ",".join(self.brokers[n] for n in sorted(self.brokers))

    def leaders(self, topic: str) -> dict[int, int]:
        """partition -> leader node of `topic`."""
        with ClusterMetadata(self.bootstrap, timeout_s=self.timeout_s) as cluster:
            cluster.refresh([topic])
            return {p: m.leader for p, m in cluster.topics[topic].partitions.items()}

    def create_topics(self, names: list[str]) -> None:
        """Create topics (by Metadata's auto-creation) and wait until each partition has a leader."""
        with ClusterMetadata(self.bootstrap, timeout_s=self.timeout_s) as cluster:
            cluster.refresh(names, allow_auto_create=True)
            if not cluster.wait_for_leaders(names, self.timeout_s):
                raise TimeoutError(f"mock topics {names} have no leaders after {self.timeout_s}s")

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def __enter__(self) -> MockCluster:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


@dataclass
class Kafka:
    """The cluster a test runs against: "ours" (our broker) or "mock" (librdkafka's)."""

    kind: str
    bootstrap: str
    mock: MockCluster | None = None

    def new_topic(self, partitions: int = 1, prefix: str = "t", spread: bool = False) -> str:
        """A fresh topic with `partitions` partitions (on the mock: MOCK_PARTITIONS of them).

        spread: on the mock, a topic whose partitions are led by more than one broker.
        The mock picks each partition's leader at random, so all four share one leader
        once in 27 topics: another topic is made then (at most SPREAD_ATTEMPTS).
        """
        for _ in range(SPREAD_ATTEMPTS):
            name = f"{prefix}-{uuid.uuid4().hex[:10]}"
            self.create_topics({name: partitions})
            if not spread or self.mock is None or len(set(self.mock.leaders(name).values())) > 1:
                return name
        raise RuntimeError(f"{SPREAD_ATTEMPTS} mock topics in a row had a single leader")

    def create_topics(self, topics: dict[str, int]) -> None:
        """Create topics given as name -> partitions, ready to use when this returns."""
        if self.mock is not None:
            too_many = {n: p for n, p in topics.items() if p > MOCK_PARTITIONS}
            if too_many:
                raise ValueError(f"mock topics have {MOCK_PARTITIONS} partitions: {too_many}")
            self.mock.create_topics(list(topics))
            return
        with AdminClient(self.bootstrap) as admin:
            admin.create_topics([NewTopic(n, p) for n, p in topics.items()], raise_errors=True)

    def deviation(self, api_key: int, version: int) -> str | None:
        """How this cluster's answer at `version` departs from Kafka's layout, if it does."""
        return MOCK_WIRE_DEVIATIONS.get((api_key, version)) if self.mock is not None else None

    def lacks(self, what: str) -> None:
        """Skip the running test on the mock, which lacks `what`."""
        if self.mock is not None:
            pytest.skip(f"librdkafka's mock cluster lacks {what}")


# --- fixtures (imported into the conftest of each test directory that uses them) -----


@pytest.fixture(scope="module")
def mock_cluster():
    """A 3-broker mock cluster, held open for the module."""
    with MockCluster() as cluster:
        yield cluster


@pytest.fixture(scope="module", params=["ours", "mock"])
def kafka(request) -> Kafka:
    """Parametrizes a test over our broker and the mock cluster."""
    if request.param == "mock":
        mock = request.getfixturevalue("mock_cluster")
        return Kafka("mock", mock.bootstrap, mock)
    return Kafka("ours", request.getfixturevalue("broker").bootstrap)
