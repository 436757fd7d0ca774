"""kafka-reassign-partitions: plan, start, follow and cancel moves of partitions to other
brokers, with a replication throttle while they copy.

    python -m broker.tools reassign-partitions --bootstrap-server HOST:PORT
        --generate --topics-to-move-json-file F --broker-list 1,2,3 [--disable-rack-aware]
    ... --execute --reassignment-json-file F [--throttle BYTES_PER_S] [--additional]
    ... --verify --reassignment-json-file F [--preserve-throttles]
    ... --cancel --reassignment-json-file F [--preserve-throttles]
    ... --list

The files are Kafka's JSON (`plan.py`). A plan is checked whole before anything is
submitted (unknown brokers, topics or partitions, duplicate replicas, more replicas than
brokers: exit 1, or 2 when the file itself is malformed); the moves are the controller's
(AlterPartitionReassignments). Lines and messages are Kafka's (broker/tools/README.md).
"""

from __future__ import annotations

import argparse
import sys

from broker.client.admin import (
    AdminClient,
    AlterConfigOp,
    ConfigResource,
    ConfigResourceType,
    PartitionReassignment,
)
from broker.controller.placement import PlacementError, assign_replicas
from broker.tools import admin_command
from broker.tools.admin_command import CommandError
from broker.tools.output import Output
from broker.tools.reassignment_plan import (
    Plan,
    PlanError,
    dump_plan,
    label,
    read_plan,
    read_topics_to_move,
)

ACTIONS = ("generate", "execute", "verify", "cancel", "list")
# KIP-73's keys: the replicas throttled (topic) and the rates (dynamic broker configs).
LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"
LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"


def main(argv: list[str] | None = None) -> int:
    return admin_command.main(argv, _parser(), _usage_problem, _run)


def _run(admin: AdminClient, args, out: Output) -> None:
    (action,) = [_ACTIONS[a] for a in ACTIONS if getattr(args, a)]
    action(admin, args, out)


# -- actions -------------------------------------------------------------------------------


def _generate(admin: AdminClient, args, out: Output) -> None:
    """Current and proposed assignments of the topics over the broker list, placed as the
    broker places a new topic (broker/controller/placement.py)."""
    live = {b.node_id: b.rack for b in admin.describe_cluster().brokers}
    unknown = sorted(set(args.broker_list) - set(live))
    if unknown:
        raise CommandError(f"Unknown broker id(s): {_ids(unknown)} (live: {_ids(sorted(live))})")
    current = _current_replicas(admin, args.topics)
    brokers = {b: None if args.disable_rack_aware else live[b] for b in args.broker_list}
    proposed: Plan = {}
    for topic in args.topics:
        partitions = sorted(p for t, p in current if t == topic)
        factor = len(current[(topic, partitions[0])])
        try:
            placed = assign_replicas(brokers, len(partitions), factor)
        except PlacementError as exc:
            raise CommandError(f"topic {topic}: {exc}") from None
        proposed.update({(topic, p): placed[p] for p in partitions})
    out.line("Current partition replica assignment")
    out.line(dump_plan(current))
    out.line()
    out.line("Proposed partition reassignment configuration")
    out.line(dump_plan(proposed))


def _execute(admin: AdminClient, args, out: Output) -> None:
    plan: Plan = args.plan
    current = check_plan(admin, plan)
    if not args.additional and admin.list_partition_reassignments():
        raise CommandError(
            "Cannot execute because there is an existing partition assignment. Use "
            "--additional to override this and create a new partition assignment in "
            "addition to the existing one."
        )
    out.line("Current partition replica assignment")
    out.line()
    out.line(dump_plan(current))
    out.line()
    out.line("Save this to use as the --reassignment-json-file option during rollback")
    if args.throttle is not None:
        _set_throttle(admin, plan, current, args.throttle)
        out.line(
            "Warning: You must run --verify periodically, until the reassignment completes, "
            "to ensure the throttle is removed."
        )
        out.line(f"The inter-broker throttle limit was set to {args.throttle} B/s")
    admin.alter_partition_reassignments(dict(plan), timeout_ms=args.timeout)
    failed = admin.last_errors
    started = [tp for tp in plan if tp not in failed]
    if started:
        out.line(f"Successfully started partition reassignments for {_labels(started)}")
    if failed:
        raise CommandError(
            "Error reassigning partition(s):\n"
            + "\n".join(f"{label(tp)}: {m or c.name}" for tp, (c, m) in sorted(failed.items()))
        )


def _verify(admin: AdminClient, args, out: Output) -> None:
    plan: Plan = args.plan
    current = _current_replicas(admin, sorted({t for t, _ in plan}), wanted=set(plan))
    moving = admin.list_partition_reassignments(list(plan))
    out.line("Status of partition reassignment:")
    for tp in sorted(plan):
        if tp in moving:
            out.line(f"Reassignment of partition {label(tp)} is still in progress.")
        elif current[tp] == plan[tp]:
            out.line(f"Reassignment of partition {label(tp)} is completed.")
        else:
            out.line(
                f"There is no active reassignment of partition {label(tp)}, but replica set "
                f"is {_ids(current[tp])} rather than {_ids(plan[tp])}."
            )
    if not moving and not args.preserve_throttles:
        _clear_throttle(admin, plan, out)


def _cancel(admin: AdminClient, args, out: Output) -> None:
    plan: Plan = args.plan
    check_plan(admin, plan, replicas=False)
    moving = admin.list_partition_reassignments(list(plan))
    if not moving:
        out.line("None of the specified partition moves are active.")
    else:
        admin.alter_partition_reassignments(dict.fromkeys(moving), timeout_ms=args.timeout)
        failed = admin.last_errors
        cancelled = [tp for tp in moving if tp not in failed]
        if cancelled:
            out.line(f"Successfully cancelled partition reassignments for: {_labels(cancelled)}")
        if failed:
            raise CommandError(
                "Error cancelling partition reassignment(s):\n"
                + "\n".join(f"{label(tp)}: {m or c.name}" for tp, (c, m) in sorted(failed.items()))
            )
    if not args.preserve_throttles:
        _clear_throttle(admin, plan, out)


def _list(admin: AdminClient, args, out: Output) -> None:
    moving = admin.list_partition_reassignments()
    if not moving:
        out.line("No partition reassignments found.")
        return
    out.line("Current partition reassignments:")
    for tp, r in sorted(moving.items()):
        out.line(_moving_line(tp, r))


def _moving_line(tp: tuple[str, int], r: PartitionReassignment) -> str:
    return (
        f"{label(tp)}: replicas: {_ids(r.replicas)}. adding: {_ids(r.adding_replicas)}. "
        f"removing: {_ids(r.removing_replicas)}."
    )


_ACTIONS = {
    "generate": _generate,
    "execute": _execute,
    "verify": _verify,
    "cancel": _cancel,
    "list": _list,
}


# -- checks and throttles ------------------------------------------------------------------


def check_plan(admin: AdminClient, plan: Plan, replicas: bool = True) -> Plan:
    """Refuse a plan the cluster cannot carry out, before anything is submitted: topics or
    partitions that do not exist, brokers that are not registered, more replicas than
    brokers. Returns the current replicas of the plan's partitions."""
    current = _current_replicas(admin, sorted({t for t, _ in plan}), wanted=set(plan))
    if not replicas:
        return current
    live = {b.node_id for b in admin.describe_cluster().brokers}
    unknown = sorted({b for r in plan.values() for b in r} - live)
    if unknown:
        raise CommandError(
            f"The proposed assignment contains non-existent brokerIDs: {_ids(unknown)} "
            f"(the brokers are {_ids(sorted(live))})"
        )
    for tp, target in sorted(plan.items()):
        if len(target) > len(live):
            raise CommandError(
                f"Partition {label(tp)}: replication factor {len(target)} larger than "
                f"available brokers: {len(live)}"
            )
    return current


def _current_replicas(
    admin: AdminClient, topics: list[str], wanted: set[tuple[str, int]] | None = None
) -> Plan:
    """(topic, partition) -> replicas now, of `wanted` (default: every partition); a topic
    or partition that does not exist is an error naming it."""
    existing = set(admin.list_topics())
    missing = [t for t in topics if t not in existing]
    if missing:
        raise CommandError(f"Topic(s) not found: {', '.join(missing)}")
    found = {
        (name, p.partition): list(p.replicas)
        for name, d in admin.describe_topics(topics).items()
        for p in d.partitions
    }
    if wanted is None:
        return found
    absent = sorted(wanted - set(found))
    if absent:
        raise CommandError(f"Unable to find partition(s): {_labels(absent)}")
    return {tp: found[tp] for tp in sorted(wanted)}


def throttled_replicas(plan: Plan, current: Plan) -> dict[str, tuple[str, str]]:
    """topic -> (leader, follower) throttled replica lists, as Kafka's tool sets them: the
    leader side throttles every current replica of a moving partition (any may be the
    source), the follower side the replicas being added."""
    leaders: dict[str, list[str]] = {}
    followers: dict[str, list[str]] = {}
    for (topic, partition), target in sorted(plan.items()):
        now = current[(topic, partition)]
        if target == now:
            continue
        leaders.setdefault(topic, []).extend(f"{partition}:{b}" for b in now)
        adding = [b for b in target if b not in now]
        followers.setdefault(topic, []).extend(f"{partition}:{b}" for b in adding)
    return {t: (",".join(leaders[t]), ",".join(followers.get(t, []))) for t in leaders}


def _set_throttle(admin: AdminClient, plan: Plan, current: Plan, rate: int) -> None:
    moving = [tp for tp in plan if plan[tp] != current[tp]]
    brokers = sorted({b for tp in moving for b in [*current[tp], *plan[tp]]})
    changes: dict[ConfigResource, list[AlterConfigOp]] = {}
    for topic, (leader, follower) in throttled_replicas(plan, current).items():
        ops = [AlterConfigOp(LEADER_REPLICAS, "SET", leader)]
        ops.append(
            AlterConfigOp(FOLLOWER_REPLICAS, "SET", follower)
            if follower
            else AlterConfigOp(FOLLOWER_REPLICAS, "DELETE")
        )
        changes[ConfigResource(ConfigResourceType.TOPIC, topic)] = ops
    for broker in brokers:
        changes[ConfigResource(ConfigResourceType.BROKER, str(broker))] = [
            AlterConfigOp(LEADER_RATE, "SET", str(rate)),
            AlterConfigOp(FOLLOWER_RATE, "SET", str(rate)),
        ]
    _alter(admin, changes, "setting the throttle")


def _clear_throttle(admin: AdminClient, plan: Plan, out: Output) -> None:
    """Remove the rates from every live broker and the throttled replicas from the plan's
    topics (Kafka's tool clears them all once the moves are done)."""
    brokers = [b.node_id for b in admin.describe_cluster().brokers]
    topics = sorted({t for t, _ in plan})
    changes = {
        ConfigResource(ConfigResourceType.BROKER, str(b)): [
            AlterConfigOp(LEADER_RATE, "DELETE"),
            AlterConfigOp(FOLLOWER_RATE, "DELETE"),
        ]
        for b in brokers
    }
    changes |= {
        ConfigResource(ConfigResourceType.TOPIC, t): [
            AlterConfigOp(LEADER_REPLICAS, "DELETE"),
            AlterConfigOp(FOLLOWER_REPLICAS, "DELETE"),
        ]
        for t in topics
    }
    _alter(admin, changes, "clearing the throttle")
    out.line(f"Clearing broker-level throttles on brokers {_ids(brokers)}")
    for topic in topics:
        out.line(f"Clearing topic-level throttles on topic {topic}")


def _alter(admin: AdminClient, changes: dict, what: str) -> None:
    admin.incremental_alter_configs(changes)
    if admin.last_errors:
        raise CommandError(
            f"{what} failed: "
            + "; ".join(f"{r}: {m or c.name}" for r, (c, m) in admin.last_errors.items())
        )


def _ids(ids) -> str:
    return ",".join(str(i) for i in ids)


def _labels(partitions) -> str:
    return ",".join(label(tp) for tp in sorted(partitions))


# -- arguments -----------------------------------------------------------------------------


def broker_list(value: str) -> list[int]:
    try:
        ids = [int(b) for b in value.split(",")]
    except ValueError:
        ids = [-1]
    if min(ids) < 0:
        raise argparse.ArgumentTypeError(f"{value!r}: expected broker ids, e.g. 1,2,3")
    if len(set(ids)) != len(ids):
        raise argparse.ArgumentTypeError(f"{value!r}: duplicate broker ids")
    return ids


def _throttle(value: str) -> int:
    if not value.lstrip("-").isdigit():
        raise argparse.ArgumentTypeError(f"{value!r} is not a number of bytes per second")
    return int(value)


def _parser():
    parser = admin_command.parser(
        "reassign-partitions",
        "kafka-reassign-partitions",
        "Move partitions to other brokers: generate a plan, execute it, verify it, cancel it.",
    )
    actions = parser.add_argument_group("actions (exactly one)")
    actions.add_argument(
        "--generate", action="store_true", help="propose a placement of topics over brokers"
    )
    actions.add_argument("--execute", action="store_true", help="start the moves of a plan")
    actions.add_argument(
        "--verify",
        action="store_true",
        help="report the moves of a plan; once all are done, remove the throttle",
    )
    actions.add_argument(
        "--cancel", action="store_true", help="cancel the moves of a plan still under way"
    )
    actions.add_argument("--list", action="store_true", help="list the moves under way")
    parser.add_argument(
        "--topics-to-move-json-file",
        metavar="FILE",
        help='generate: {"version":1,"topics":[{"topic":"t"},...]}',
    )
    parser.add_argument(
        "--broker-list", type=broker_list, metavar="1,2,3", help="generate: the target brokers"
    )
    parser.add_argument(
        "--disable-rack-aware", action="store_true", help="generate: ignore the brokers' racks"
    )
    parser.add_argument(
        "--reassignment-json-file",
        metavar="FILE",
        help="execute/verify/cancel: the plan, as --generate proposes it",
    )
    parser.add_argument(
        "--throttle",
        type=_throttle,
        metavar="BYTES_PER_S",
        help="execute: bound the moves' replication to this rate (removed by --verify)",
    )
    parser.add_argument(
        "--additional",
        action="store_true",
        help="execute: even while other moves are under way",
    )
    parser.add_argument(
        "--preserve-throttles",
        action="store_true",
        help="verify/cancel: leave the throttle in place",
    )
    return parser


def _usage_problem(args) -> str | None:
    """What is wrong with the options or the files they name (read into `args.topics`,
    `args.plan`), or None."""
    actions = [f"--{a}" for a in ACTIONS if getattr(args, a)]
    if len(actions) != 1:
        return "exactly one action is needed: --generate, --execute, --verify, --cancel or --list"
    action = actions[0]
    if args.generate:
        if not args.topics_to_move_json_file or not args.broker_list:
            return "--generate needs --topics-to-move-json-file and --broker-list"
    elif args.topics_to_move_json_file or args.broker_list or args.disable_rack_aware:
        return (
            f"{action} takes no --topics-to-move-json-file, --broker-list or --disable-rack-aware"
        )
    needs_plan = args.execute or args.verify or args.cancel
    if needs_plan and not args.reassignment_json_file:
        return f"{action} needs --reassignment-json-file"
    if not needs_plan and args.reassignment_json_file:
        return f"{action} takes no --reassignment-json-file"
    if (args.throttle is not None or args.additional) and not args.execute:
        return f"{action} takes no --throttle or --additional"
    if args.throttle is not None and args.throttle <= 0:
        return f"--throttle must be a positive number of bytes per second, not {args.throttle}"
    if args.preserve_throttles and not (args.verify or args.cancel):
        return f"{action} takes no --preserve-throttles"
    try:  # the files' own problems are argument problems too
        if args.topics_to_move_json_file:
            args.topics = read_topics_to_move(args.topics_to_move_json_file)
        if args.reassignment_json_file:
            args.plan = read_plan(args.reassignment_json_file)
    except PlanError as exc:
        return str(exc)
    return None


if __name__ == "__main__":
    sys.exit(main())
