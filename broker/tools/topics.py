"""kafka-topics: list, create, describe, grow and delete topics.

    python -m broker.tools topics --bootstrap-server HOST:PORT --list [--topic T]
    ... --create --topic T [--partitions N] [--replication-factor R] [--config K=V ...]
        [--replica-assignment 0:1,1:2,...] [--if-not-exists]
    ... --describe [--topic T] [--under-replicated-partitions | --unavailable-partitions |
        --under-min-isr-partitions | --at-min-isr-partitions] [--if-exists]
    ... --alter --topic T --partitions N [--replica-assignment ...] [--if-exists]
    ... --delete --topic T [--if-exists]

`--topic` is a topic name or, outside --create, a regular expression matching whole names,
as Kafka's tool takes it. Lines and messages are Kafka's (broker/tools/README.md). Exit
codes: 0 done, 1 an error was reported, 2 bad arguments.
"""

from __future__ import annotations

import argparse
import re
import sys

from broker.client.admin import (
    AdminClient,
    ConfigResource,
    ConfigResourceType,
    ConfigSource,
    NewPartitions,
    NewTopic,
    PartitionInfo,
)
from broker.protocol.errors import ErrorCode
from broker.protocol.topic import topic_name_problem
from broker.tools import admin_command
from broker.tools.admin_command import CommandError
from broker.tools.arguments import given_options
from broker.tools.output import Output

ACTIONS = ("list", "create", "describe", "alter", "delete")
FILTERS = (
    "under_replicated_partitions",
    "unavailable_partitions",
    "under_min_isr_partitions",
    "at_min_isr_partitions",
)
MIN_ISR = "min.insync.replicas"


def main(argv: list[str] | None = None) -> int:
    return admin_command.main(argv, _parser(), _usage_problem, _run)


def _run(admin: AdminClient, args, out: Output) -> None:
    if args.create:
        _create(admin, args, out)
        return
    names = _matching(admin, args)
    if not names and (args.alter or args.delete):
        return  # --if-exists, and nothing exists
    if args.list:
        for name in names:
            out.line(name)
    elif args.describe:
        _describe(admin, names, args, out)
    elif args.alter:
        _alter(admin, names, args)
    else:
        admin.delete_topics(names, timeout_ms=args.timeout)
        _raise_failures(admin)


def _matching(admin: AdminClient, args) -> list[str]:
    """The topics `--topic` names (all without it); a name that matches nothing is an
    error for the actions on given topics, unless --if-exists."""
    topics = admin.list_topics()
    if args.exclude_internal:
        topics = [t for t in topics if not admin.cluster.topics[t].is_internal]
    if args.topic is None:
        return topics
    pattern = re.compile(args.topic)
    names = [t for t in topics if pattern.fullmatch(t)]
    if not names and not args.list and not args.if_exists:
        raise CommandError(f"Topic '{args.topic}' does not exist as expected")
    return names


def _create(admin: AdminClient, args, out: Output) -> None:
    configs = dict(args.config or [])
    assignment = args.replica_assignment
    topic = NewTopic(
        args.topic,
        args.partitions or -1,
        args.replication_factor or -1,
        configs,
        None if assignment is None else dict(enumerate(assignment)),
    )
    outcome = admin.create_topics([topic], timeout_ms=args.timeout)
    if outcome[args.topic] == ErrorCode.TOPIC_ALREADY_EXISTS and args.if_not_exists:
        return
    _raise_failures(admin)
    out.line(f"Created topic {args.topic}.")


def _alter(admin: AdminClient, names: list[str], args) -> None:
    wanted: dict[str, int | NewPartitions] = {}
    for name in names:
        if args.replica_assignment is None:
            wanted[name] = args.partitions
            continue
        # Kafka's tool takes the whole topic's assignment; the entries past the current
        # partitions are the new ones.
        current = len(admin.describe_topics([name])[name].partitions)
        wanted[name] = NewPartitions(
            len(args.replica_assignment), args.replica_assignment[current:]
        )
    admin.create_partitions(wanted, timeout_ms=args.timeout)
    _raise_failures(admin)


def _describe(admin: AdminClient, names: list[str], args, out: Output) -> None:
    described = admin.describe_topics(names)
    live = {b.node_id for b in admin.describe_cluster().brokers}
    moving = admin.list_partition_reassignments() if names else {}
    shown_filter = next((f for f in FILTERS if getattr(args, f)), None)
    for name in names:
        partitions = described[name].partitions
        configs = admin.describe_configs(
            [ConfigResource(ConfigResourceType.TOPIC, name)], include_synonyms=False
        )[ConfigResource(ConfigResourceType.TOPIC, name)]
        min_isr = next((int(c.value) for c in configs if c.name == MIN_ISR and c.value), 1)
        if shown_filter is None:
            overrides = ",".join(
                f"{c.name}={c.value}"
                for c in configs
                if c.source == ConfigSource.DYNAMIC_TOPIC_CONFIG
            )
            factor = _replication_factor(partitions[0], moving.get((name, 0))) if partitions else 0
            out.line(
                f"Topic: {name}\tPartitionCount: {len(partitions)}\t"
                f"ReplicationFactor: {factor}\tConfigs: {overrides}"
            )
        for p in partitions:
            reassignment = moving.get((name, p.partition))
            if shown_filter and not _shown(shown_filter, p, reassignment, live, min_isr):
                continue
            line = (
                f"\tTopic: {name}\tPartition: {p.partition}\t"
                f"Leader: {p.leader if p.leader >= 0 else 'none'}\t"
                f"Replicas: {_ids(p.replicas)}\tIsr: {_ids(p.isr)}"
            )
            if reassignment is not None:
                line += (
                    f"\tAdding Replicas: {_ids(reassignment.adding_replicas)}"
                    f"\tRemoving Replicas: {_ids(reassignment.removing_replicas)}"
                )
            out.line(line)


def _replication_factor(p: PartitionInfo, reassignment) -> int:
    """As Kafka counts it: while a partition moves, its target's size."""
    if reassignment is None:
        return len(p.replicas)
    return len(p.replicas) - len(reassignment.removing_replicas)


def _shown(which: str, p: PartitionInfo, reassignment, live: set[int], min_isr: int) -> bool:
    """Whether a partition passes the describe filter (Kafka's tests)."""
    has_leader = p.leader >= 0 and p.leader in live
    if which == "under_replicated_partitions":
        return len(p.isr) < _replication_factor(p, reassignment)
    if which == "unavailable_partitions":
        return not has_leader
    if which == "under_min_isr_partitions":
        return not has_leader or len(p.isr) < min_isr
    return has_leader and len(p.isr) == min_isr  # at_min_isr_partitions


def _ids(ids: list[int]) -> str:
    return ",".join(str(i) for i in ids)


def _raise_failures(admin: AdminClient) -> None:
    """The failures of the last call, as the broker worded them."""
    if admin.last_errors:
        raise CommandError(
            "; ".join(
                message or f"{code.name} for {name}"
                for name, (code, message) in admin.last_errors.items()
            )
        )


# -- arguments -----------------------------------------------------------------------------


def config_pair(value: str):
    key, sep, val = value.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"{value!r} is not KEY=VALUE")
    return key.strip(), val


def replica_assignment(value: str) -> list[list[int]]:
    """`1:2,2:3`: partition 0 on brokers 1 and 2 (1 preferred), partition 1 on 2 and 3."""
    try:
        parts = [[int(b) for b in p.split(":")] for p in value.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{value!r}: expected broker ids, e.g. 1:2,2:3 (partitions separated by ',', "
            "the replicas of each by ':')"
        ) from None
    for i, replicas in enumerate(parts):
        if len(set(replicas)) != len(replicas):
            raise argparse.ArgumentTypeError(
                f"Partition {i} has duplicate replica assignment {_ids(replicas)}"
            )
        if len(replicas) != len(parts[0]):
            raise argparse.ArgumentTypeError(
                f"Partition {i} has {len(replicas)} replicas, partition 0 has {len(parts[0])}: "
                "every partition needs the same replication factor"
            )
    return parts


def _parser():
    parser = admin_command.parser(
        "topics", "kafka-topics", "Create, delete, describe, or change a topic."
    )
    actions = parser.add_argument_group("actions (exactly one)")
    actions.add_argument("--list", action="store_true", help="list the topics")
    actions.add_argument("--create", action="store_true", help="create a topic")
    actions.add_argument("--describe", action="store_true", help="describe topics")
    actions.add_argument("--alter", action="store_true", help="add partitions to a topic")
    actions.add_argument("--delete", action="store_true", help="delete topics")
    parser.add_argument(
        "--topic", metavar="TOPIC", help="the topic (outside --create: a regular expression)"
    )
    parser.add_argument(
        "--partitions",
        type=admin_command.positive_int,
        metavar="N",
        help="create: the number of partitions (default: the broker's num.partitions); "
        "alter: the new count",
    )
    parser.add_argument(
        "--replication-factor",
        type=admin_command.positive_int,
        metavar="R",
        help="create: replicas of each partition (default: default.replication.factor)",
    )
    parser.add_argument(
        "--config",
        action="append",
        type=config_pair,
        metavar="KEY=VALUE",
        help="create: a topic config override (repeatable)",
    )
    parser.add_argument(
        "--replica-assignment",
        type=replica_assignment,
        metavar="B:B,B:B,...",
        help="create/alter: the replicas of each partition (partitions separated by ',')",
    )
    parser.add_argument(
        "--if-exists", action="store_true", help="alter/describe/delete: only if the topic exists"
    )
    parser.add_argument(
        "--if-not-exists", action="store_true", help="create: only if the topic does not exist"
    )
    parser.add_argument(
        "--exclude-internal", action="store_true", help="list/describe: leave out internal topics"
    )
    filters = parser.add_argument_group("describe filters (at most one)")
    filters.add_argument(
        "--under-replicated-partitions",
        action="store_true",
        help="partitions with fewer replicas in sync than assigned",
    )
    filters.add_argument(
        "--unavailable-partitions",
        action="store_true",
        help="partitions without a leader, or whose leader is not live",
    )
    filters.add_argument(
        "--under-min-isr-partitions",
        action="store_true",
        help="partitions with fewer replicas in sync than min.insync.replicas",
    )
    filters.add_argument(
        "--at-min-isr-partitions",
        action="store_true",
        help="partitions with exactly min.insync.replicas replicas in sync",
    )
    return parser


def _usage_problem(args) -> str | None:
    """What is wrong with the combination of options (Kafka's checks), or None."""
    actions = given_options(args, ACTIONS)
    if len(actions) != 1:
        return "exactly one action is needed: --list, --create, --describe, --alter or --delete"
    action = actions[0]
    filters = given_options(args, FILTERS)
    if filters and not args.describe:
        return f"{action} takes no {', '.join(filters)}"
    if len(filters) > 1:
        return f"--describe takes at most one filter, not {' '.join(filters)}"
    if args.topic is None and (args.create or args.alter or args.delete):
        return f"{action} needs --topic"
    if args.create:
        problem = topic_name_problem(args.topic)
        if problem:
            return f"--topic {args.topic!r}: {problem}"
    elif args.topic is not None:
        try:
            re.compile(args.topic)
        except re.error as exc:
            return f"--topic {args.topic!r} is not a regular expression: {exc}"
    if args.if_exists and not (args.alter or args.describe or args.delete):
        return f"{action} takes no --if-exists"
    if args.if_not_exists and not args.create:
        return f"{action} takes no --if-not-exists"
    if args.config and not args.create:
        return f"{action} takes no --config (use kafka-configs to change a topic's configs)"
    if args.replication_factor is not None and not args.create:
        return f"{action} takes no --replication-factor"
    if args.partitions is not None and not (args.create or args.alter):
        return f"{action} takes no --partitions"
    if args.replica_assignment is not None:
        if not (args.create or args.alter):
            return f"{action} takes no --replica-assignment"
        if args.create and (args.partitions or args.replication_factor):
            return "--replica-assignment excludes --partitions and --replication-factor"
        if args.alter and args.partitions not in (None, len(args.replica_assignment)):
            return "--partitions and --replica-assignment disagree on the number of partitions"
    if args.alter and args.partitions is None and args.replica_assignment is None:
        return "--alter needs --partitions (the new count)"
    if args.exclude_internal and not (args.list or args.describe):
        return f"{action} takes no --exclude-internal"
    return None


if __name__ == "__main__":
    sys.exit(main())
