"""kafka-consumer-groups: list, describe, reset offsets of and delete consumer groups.

    python -m broker.tools consumer-groups --bootstrap-server HOST:PORT --list [--state [STATES]]
    ... --describe (--group G ... | --all-groups) [--offsets | --members [--verbose] | --state]
    ... --reset-offsets (--group G | --all-groups) (--topic T[:P,...] ... | --all-topics)
        (--to-earliest | --to-latest | --to-offset N | --shift-by N | --to-datetime DT)
        [--dry-run | --execute]
    ... --delete (--group G ... | --all-groups)
    ... --delete-offsets --group G --topic T[:P,...] ...

Options, columns and messages follow Kafka's tool (broker/tools/README.md). Exit codes:
0 done, 1 an error was reported (unknown group, group not empty, a broker error), 2 bad
arguments (argparse's usage error).
"""

from __future__ import annotations

import argparse
import os
import sys

from broker.client.security import command_security
from broker.protocol.errors import KafkaError
from broker.tools import group_describe, offset_reset
from broker.tools.admin_command import add_command_config
from broker.tools.arguments import datetime_ms, given_options, topic_spec
from broker.tools.groups import (
    GROUP_STATES,
    STATES_BY_KEY,
    GroupTool,
    delete_groups,
    delete_offsets,
    list_groups,
)
from broker.tools.output import Output

PROG = "python -m broker.tools consumer-groups"
SCRIPT = "kafka-consumer-groups"  # the console script (pyproject.toml), Kafka's name
ACTIONS = ("list", "describe", "delete", "reset_offsets", "delete_offsets")
RESET_SCENARIOS = ("to_earliest", "to_latest", "to_offset", "shift_by", "to_datetime")


def main(argv: list[str] | None = None) -> int:
    parser = _parser(SCRIPT if os.path.basename(sys.argv[0]) == SCRIPT else PROG)
    args = parser.parse_args(argv)
    problem = _usage_problem(args)
    if problem:
        parser.error(problem)
    security = command_security(parser, args.command_config)
    out = Output()
    try:
        with GroupTool(args.bootstrap_server, args.timeout, out, security) as tool:
            _run(tool, args)
    except KafkaError as exc:
        out.error(f"Executing consumer group command failed due to {exc}")
    return 1 if out.failed else 0


def _run(tool: GroupTool, args) -> None:
    if args.list:
        list_groups(tool, args.state)
    elif args.describe:
        groups = tool.consumer_group_ids() if args.all_groups else args.group
        view = "members" if args.members else "state" if args.state is not None else "offsets"
        group_describe.describe(tool, groups, view, args.verbose)
    elif args.reset_offsets:
        groups = tool.consumer_group_ids() if args.all_groups else args.group
        if not (args.execute or args.dry_run):
            tool.out.warn("No action will be performed as the --execute option is missing.")
        offset_reset.reset_offsets(tool, groups, _reset_request(args))
    elif args.delete:
        delete_groups(tool, tool.consumer_group_ids() if args.all_groups else args.group)
    else:
        delete_offsets(tool, args.group[0], args.topic)


# -- arguments -----------------------------------------------------------------------------


def _parser(prog: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog,
        description="List, describe, reset the offsets of and delete consumer groups.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--bootstrap-server", required=True, metavar="HOST:PORT", help="brokers to connect to"
    )
    parser.add_argument(
        "--timeout",
        type=int,
        default=5000,
        metavar="MS",
        help="how long to wait for the brokers, e.g. while a group stabilizes (default 5000)",
    )
    add_command_config(parser)
    actions = parser.add_argument_group("actions (exactly one)")
    actions.add_argument("--list", action="store_true", help="list the consumer groups")
    actions.add_argument("--describe", action="store_true", help="describe groups")
    actions.add_argument("--delete", action="store_true", help="delete groups and their offsets")
    actions.add_argument(
        "--reset-offsets",
        action="store_true",
        help="reset committed offsets (a dry run unless --execute)",
    )
    actions.add_argument(
        "--delete-offsets", action="store_true", help="delete committed offsets of topics"
    )
    scope = parser.add_argument_group("what")
    scope.add_argument("--group", action="append", metavar="GROUP", help="a group (repeatable)")
    scope.add_argument("--all-groups", action="store_true", help="every consumer group")
    scope.add_argument(
        "--topic",
        action="append",
        type=topic_spec,
        metavar="TOPIC[:P,...]",
        help="a topic, or some of its partitions (repeatable)",
    )
    scope.add_argument(
        "--all-topics", action="store_true", help="every topic the group has committed"
    )
    views = parser.add_argument_group("views")
    views.add_argument("--offsets", action="store_true", help="describe: offsets and lag (default)")
    views.add_argument("--members", action="store_true", help="describe: the members")
    views.add_argument("--verbose", action="store_true", help="describe --members: assignments")
    views.add_argument(
        "--state",
        nargs="?",
        const="",
        metavar="STATES",
        help="list: with states, or only those in STATES (comma-separated); describe: state",
    )
    reset = parser.add_argument_group("reset scenarios (exactly one with --reset-offsets)")
    reset.add_argument("--to-earliest", action="store_true", help="the log start offsets")
    reset.add_argument("--to-latest", action="store_true", help="the log end offsets")
    reset.add_argument("--to-offset", type=int, metavar="N", help="offset N (clamped to the log)")
    reset.add_argument(
        "--shift-by", type=int, metavar="N", help="the committed offset plus N (clamped)"
    )
    reset.add_argument(
        "--to-datetime",
        type=datetime_ms,
        metavar="YYYY-MM-DDTHH:mm:SS.sss",
        help="the first offset at or after this time (UTC unless a zone follows)",
    )
    reset.add_argument("--dry-run", action="store_true", help="print the plan only (default)")
    reset.add_argument("--execute", action="store_true", help="commit the new offsets")
    return parser


def _usage_problem(args) -> str | None:
    """What is wrong with the combination of options (Kafka's checks), or None."""
    actions = given_options(args, ACTIONS)
    if len(actions) != 1:
        return "exactly one action is needed: --list, --describe, --delete, --reset-offsets or --delete-offsets"
    action = actions[0]
    groups = bool(args.group) or args.all_groups
    if args.group and args.all_groups:
        return "--group and --all-groups exclude each other"
    if args.list and (groups or args.topic or args.all_topics):
        return "--list takes no --group, --all-groups, --topic or --all-topics"
    if args.topic and not (args.reset_offsets or args.delete_offsets):
        return f"{action} takes no --topic"
    if args.all_topics and not args.reset_offsets:
        return f"{action} takes no --all-topics"
    views = given_options(args, ("offsets", "members", "state"))
    if views and not (args.describe or (args.list and views == ["--state"])):
        return f"{action} takes no {', '.join(views)}"
    if args.verbose and not args.describe:
        return "--verbose goes with --describe --members"
    scenarios = given_options(args, RESET_SCENARIOS)
    resets = scenarios + given_options(args, ("dry_run", "execute"))
    if resets and not args.reset_offsets:
        return f"{action} takes no {', '.join(resets)}"
    if args.describe:
        if not groups:
            return "--describe needs --group or --all-groups"
        if len(views) > 1:
            return f"--describe takes at most one of --offsets, --members, --state, not {' '.join(views)}"
        if args.state:
            return "--describe takes no value for --state"
    if args.list and args.state:
        bad = [s for s in args.state.split(",") if s.strip().lower() not in STATES_BY_KEY]
        if bad:
            return f"invalid state list {args.state!r}: valid states are {', '.join(GROUP_STATES)}"
    if args.delete and not groups:
        return "--delete needs --group or --all-groups"
    if args.reset_offsets:
        if not groups:
            return "--reset-offsets needs --group or --all-groups"
        if bool(args.topic) == args.all_topics:
            return "--reset-offsets needs one of --topic and --all-topics"
        if len(scenarios) != 1:
            return (
                "--reset-offsets needs exactly one of --to-earliest, --to-latest, --to-offset, "
                "--shift-by, --to-datetime"
            )
        if args.dry_run and args.execute:
            return "--reset-offsets takes one of --dry-run and --execute, not both"
    if args.delete_offsets:
        if args.all_groups or not args.group or len(args.group) != 1:
            return "--delete-offsets needs exactly one --group"
        if not args.topic:
            return "--delete-offsets needs --topic"
    if args.timeout <= 0:
        return f"--timeout must be positive, not {args.timeout}"
    return None


def _reset_request(args) -> offset_reset.ResetRequest:
    (scenario,) = given_options(args, RESET_SCENARIOS)
    name = scenario.removeprefix("--").replace("-", "_")
    value = getattr(args, name)
    return offset_reset.ResetRequest(
        topics=None if args.all_topics else args.topic,
        scenario=name,
        value=None if value is True else value,
        execute=args.execute,
    )


if __name__ == "__main__":
    sys.exit(main())
