"""Where the replicas of a new topic's partitions go, as Kafka's AdminUtils places them.

Without racks: sort the live brokers; partition i's first replica is broker
(start + i) mod n, and its other replicas follow at a shift that grows by one every n
partitions, so leaders and followers spread evenly and no two partitions share the same
replica list more than necessary. With `broker.rack` on every broker: the same walk over
a rack-alternating broker list, skipping a broker whose rack (or itself) already holds a
replica while some rack (or broker) holds none, so a partition's replicas land on
distinct racks where there are enough. Facts from Kafka's placement rules
(docs/contracts/cluster.md, "Replica placement").
"""

from __future__ import annotations

import random
from collections.abc import Mapping


class PlacementError(ValueError):
    """The request cannot be placed (more replicas than brokers, no brokers, racks on
    only some brokers)."""


def assign_replicas(
    brokers: Mapping[int, str | None],
    partitions: int,
    replication_factor: int,
    *,
    start_index: int | None = None,
    first_partition: int = 0,
    rng: random.Random | None = None,
) -> dict[int, list[int]]:
    """partition -> replicas (the first is the preferred leader) for `partitions` new
    partitions numbered from `first_partition`.

    `brokers` maps each live broker id to its rack (None when it has none). The random
    start spreads the leaders of different topics; tests pass `start_index`.
    """
    if partitions <= 0:
        raise PlacementError(f"number of partitions must be larger than 0, not {partitions}")
    if replication_factor <= 0:
        raise PlacementError(f"replication factor must be larger than 0, not {replication_factor}")
    if replication_factor > len(brokers):
        raise PlacementError(
            f"replication factor: {replication_factor} larger than available brokers: "
            f"{len(brokers)}"
        )
    rng = rng or random.Random()
    with_rack = sum(rack is not None for rack in brokers.values())
    if 0 < with_rack < len(brokers):
        # As Kafka: a half-racked cluster would silently lose the rack guarantee.
        raise PlacementError(
            "not all brokers have rack information (broker.rack) for rack-aware placement"
        )
    if with_rack:
        ordered = rack_alternated(brokers)
        racks = {b: brokers[b] for b in ordered}
    else:
        ordered, racks = sorted(brokers), None
    n = len(ordered)
    start = rng.randrange(n) if start_index is None else start_index
    base_shift = rng.randrange(n) if start_index is None else start_index
    num_racks = len(set(racks.values())) if racks else 1
    result: dict[int, list[int]] = {}
    for partition in range(first_partition, first_partition + partitions):
        # The follower shift grows by one every n partitions; computed from the partition
        # number, partitions added later continue the same walk.
        shift = base_shift + partition // n
        first = (partition + start) % n
        replicas = [ordered[first]]
        if racks is None:
            for j in range(replication_factor - 1):
                replicas.append(ordered[_replica_index(first, shift, j, n)])
        else:
            _add_rack_aware(replicas, ordered, racks, num_racks, first, shift, replication_factor)
        result[partition] = replicas
    return result


def _replica_index(first: int, shift: int, j: int, n: int) -> int:
    return (first + 1 + (shift + j) % (n - 1)) % n


def _add_rack_aware(
    replicas: list[int],
    ordered: list[int],
    racks: dict[int, str],
    num_racks: int,
    first: int,
    shift: int,
    replication_factor: int,
) -> None:
    n = len(ordered)
    racks_used = {racks[replicas[0]]}
    brokers_used = {replicas[0]}
    k = 0
    while len(replicas) < replication_factor:
        broker = ordered[_replica_index(first, shift * num_racks, k, n)]
        k += 1
        rack = racks[broker]
        # Skip a broker whose rack already has a replica while another rack has none, or
        # which has one itself while another broker has none.
        if rack in racks_used and len(racks_used) < num_racks:
            continue
        if broker in brokers_used and len(brokers_used) < n:
            continue
        replicas.append(broker)
        racks_used.add(rack)
        brokers_used.add(broker)


def rack_alternated(brokers: Mapping[int, str | None]) -> list[int]:
    """Brokers ordered rack by rack in turn (racks sorted, brokers sorted within a rack):
    rack a: 0, 3; rack b: 1; rack c: 2, 4 -> 0, 1, 2, 3, 4."""
    by_rack: dict[str, list[int]] = {}
    for broker in sorted(brokers):
        by_rack.setdefault(brokers[broker], []).append(broker)
    queues = [by_rack[rack] for rack in sorted(by_rack)]
    result: list[int] = []
    i = 0
    while len(result) < len(brokers):
        queue = queues[i % len(queues)]
        if queue:
            result.append(queue.pop(0))
        i += 1
    return result
