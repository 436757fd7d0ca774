"""The consumer offset checker of Kafka 0.8 (`ConsumerOffsetChecker`) for groups of the
ZooKeeper consumer (broker/client/zk_consumer): per partition, the group's committed
offset in ZooKeeper, the log's end (from the partition's leader), the lag between them and
the owning consumer thread.

    consumer-offset-checker --zookeeper HOST:PORT[/CHROOT] --group G [--topic T1,T2] [--broker-info]

The columns are Kafka's: Group, Topic, Pid, Offset, logSize, Lag, Owner; "unknown" where a
number cannot be had (no committed offset, no leader), "none" for a partition no one owns.
"""

from __future__ import annotations

import argparse
import sys
import warnings

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException, NoNodeError
from kazoo.handlers.threading import KazooTimeoutError

from broker.client.simple_consumer import SimpleConsumer
from broker.client.zk_consumer import zk_group
from broker.protocol.errors import KafkaError
from broker.zk import layout as z

ROW = "%-15s %-30s %-3s %-15s %-15s %-15s %s"
HEADER = ROW % ("Group", "Topic", "Pid", "Offset", "logSize", "Lag", "Owner")
UNKNOWN = "unknown"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="consumer-offset-checker",
        description="Offsets, log sizes and lag of a ZooKeeper consumer group, per partition.",
    )
    parser.add_argument(
        "--zookeeper", required=True, help="the cluster's zookeeper.connect (chroot included)"
    )
    parser.add_argument("--group", required=True, help="the consumer group")
    parser.add_argument(
        "--topic", help="comma-separated topics (default: every topic the group has state for)"
    )
    parser.add_argument("--broker-info", action="store_true", help="also list the brokers")
    parser.add_argument(
        "--timeout-ms", type=int, default=10000, help="ZooKeeper and broker request timeout"
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    try:
        args = _parser().parse_args(argv)
    except SystemExit as exc:  # --help (0) or bad arguments (2), already printed
        return int(exc.code or 0)
    timeout_s = args.timeout_ms / 1000
    client = KazooClient(hosts=args.zookeeper, timeout=timeout_s)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", "No chroot path exists", UserWarning)
            client.start(timeout=timeout_s)
    except KazooTimeoutError:
        client.close()
        print(f"error: cannot connect to ZooKeeper at {args.zookeeper}", file=sys.stderr)
        return 1
    try:
        return _check(client, args, timeout_s)
    except (KazooException, z.ZkDataError) as exc:
        print(f"error: reading ZooKeeper at {args.zookeeper}: {exc}", file=sys.stderr)
        return 1
    finally:
        client.stop()
        client.close()


def _check(client: KazooClient, args: argparse.Namespace, timeout_s: float) -> int:
    group = args.group
    if not client.exists(f"{z.CONSUMERS}/{group}"):
        print(f"error: no consumer group {group!r} in {args.zookeeper}", file=sys.stderr)
        return 1
    topics = (
        [t.strip() for t in args.topic.split(",") if t.strip()]
        if args.topic
        else zk_group.group_topics(client, group)
    )
    servers = zk_group.bootstrap_servers(client)
    consumer = None
    if servers:
        try:
            consumer = SimpleConsumer(servers, "consumer-offset-checker", timeout_s)
        except KafkaError as exc:
            print(f"warning: no broker answers ({exc}); logSize unknown", file=sys.stderr)
    else:
        print("warning: no broker is registered; logSize unknown", file=sys.stderr)
    try:
        print(HEADER)
        for topic in topics:
            for partition in _partitions(client, group, topic):
                print(_row(client, consumer, group, topic, partition))
    finally:
        if consumer is not None:
            consumer.close()
    if args.broker_info:
        print("BROKER INFO")
        for broker_id, registration in sorted(zk_group.read_registrations(client).items()):
            endpoint = registration.endpoints[0]
            print(f"{broker_id} -> {endpoint.host}:{endpoint.port}")
    return 0


def _partitions(client: KazooClient, group: str, topic: str) -> list[int]:
    """The topic's partitions; for a topic gone from the brokers, those the group has
    state for."""
    known = zk_group.topic_partitions(client, [topic]).get(topic)
    if known is not None:
        return known
    found: set[int] = set()
    for path in (z.consumer_offsets_path(group, topic), z.consumer_owners_path(group, topic)):
        try:
            found.update(int(c) for c in client.get_children(path) if c.isdigit())
        except NoNodeError:
            pass
    return sorted(found)


def _row(client, consumer, group: str, topic: str, partition: int) -> str:
    offset = zk_group.committed_offset(client, group, topic, partition)
    log_size: int | None = None
    if consumer is not None:
        try:
            log_size = consumer.latest_offset(topic, partition)
        except KafkaError:
            log_size = None
    lag = log_size - offset if offset is not None and log_size is not None else None
    owner = zk_group.owner(client, group, topic, partition)
    return ROW % (
        group,
        topic,
        partition,
        UNKNOWN if offset is None else offset,
        UNKNOWN if log_size is None else log_size,
        UNKNOWN if lag is None else lag,
        owner or "none",
    )


if __name__ == "__main__":
    sys.exit(main())
