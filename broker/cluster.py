"""The cluster's vocabulary: the names the controller, every broker's side of the cluster
(broker/server/), the ZooKeeper layout (broker/zk/) and the clients share.

Addresses come in two kinds, and only two, because they really differ:
- a broker as the cluster knows it (`BrokerRegistration`: its id, rack and every
  listener's `Endpoint`, each with its name and security protocol): what it registers in
  ZooKeeper, what the controller sends every broker in UpdateMetadata and what the
  metadata cache answers clients from;
- a broker as a client is told of it (`Node`: id, host, port, rack), in Metadata,
  FindCoordinator and DescribeCluster answers: the address on the listener the client
  asked on, whose name and protocol the answer does not carry (and a client must not
  guess them).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from broker.protocol.errors import Refused


class TopicPartition(NamedTuple):
    """A partition of a topic. A plain `(topic, partition)` tuple is equal to it and hashes
    the same, so either finds the same dict entry."""

    topic: str
    partition: int


# A partition state's leader when no replica leads it.
NO_LEADER = -1
# Kafka's marker, in an UpdateMetadata partition state, for a partition of a topic being
# deleted: the metadata cache forgets it.
LEADER_DURING_DELETE = -2

# Kafka's ids of the security protocols, as UpdateMetadata's endpoints carry them.
SECURITY_PROTOCOL_IDS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}
SECURITY_PROTOCOL_NAMES = {i: name for name, i in SECURITY_PROTOCOL_IDS.items()}


@dataclass(frozen=True)
class Endpoint:
    """One listener of a broker, as other brokers and clients reach it."""

    listener: str  # the listener name, e.g. PLAINTEXT
    host: str
    port: int
    security_protocol: str = "PLAINTEXT"

    def url(self) -> str:
        return f"{self.listener}://{self.host}:{self.port}"


@dataclass(frozen=True)
class BrokerRegistration:
    """A live broker of the cluster: its `/brokers/ids/<id>` znode as the controller reads
    it, and the live brokers of UpdateMetadata that every broker's metadata cache holds."""

    broker_id: int
    endpoints: tuple[Endpoint, ...]
    rack: str | None = None
    # What only the znode says (UpdateMetadata carries neither): when the broker
    # registered, and the znode's creation zxid, Kafka's broker epoch, which tells a
    # broker that restarted apart from the registration of the one that died.
    timestamp_ms: int = 0
    epoch: int = -1

    def endpoint(self, listener: str) -> Endpoint | None:
        return next((e for e in self.endpoints if e.listener == listener), None)

    def address(self, listener: str) -> tuple[str, int] | None:
        """(host, port) of the listener, None when the broker has no such listener."""
        found = self.endpoint(listener)
        return None if found is None else (found.host, found.port)


class Node(NamedTuple):
    """A broker as a client is told of it: reached on the listener the client asked on."""

    node_id: int
    host: str
    port: int
    rack: str | None = None


@dataclass(frozen=True)
class LeaderAndIsr:
    """A partition's leader and in-sync replicas as the controller decided them (its state
    znode), and the znode version it was read or written at (the conditional updates of
    leaders and controller compare it)."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    zk_version: int = field(default=-1, compare=False)
    # The zxid of the write it was read at (the znode's mzxid; -1 when not read): a
    # controller taking over compares it with brokers' epochs, the czxids of their
    # registrations (docs/contracts/cluster.md, "Controller failover").
    zxid: int = field(default=-1, compare=False)

    def with_version(self, zk_version: int) -> LeaderAndIsr:
        return LeaderAndIsr(
            self.leader, self.leader_epoch, self.isr, self.controller_epoch, zk_version
        )


class NotController(Exception):
    """This broker is not (or no longer) the controller."""


class TopicError(Refused):
    """Why a topic operation was refused: a Kafka error code and a message for the client."""


@dataclass(frozen=True)
class TopicSpec:
    """One topic of a CreateTopics request (-1: the broker's default)."""

    name: str
    partitions: int = -1
    replication_factor: int = -1
    # Replicas per partition chosen by the client, or None to let placement choose.
    assignment: dict[int, list[int]] | None = None
    configs: dict[str, str] | None = None

    @classmethod
    def from_request(cls, topic: dict) -> TopicSpec:
        assignment = {a["partition_index"]: list(a["broker_ids"]) for a in topic["assignments"]}
        return cls(
            topic["name"],
            topic["num_partitions"],
            topic["replication_factor"],
            assignment or None,
            {c["name"]: c["value"] for c in topic["configs"]},
        )
