"""kafka-acls: add, list and remove ACLs.

    python -m broker.tools acls --bootstrap-server HOST:PORT
        (--add | --remove [--force] | --list)
        [--allow-principal P ...] [--deny-principal P ...] [--allow-host H ...]
        [--deny-host H ...] [--operation OP ...]
        [--topic T ...] [--group G ...] [--cluster] [--transactional-id ID ...]
        [--resource-pattern-type literal|prefixed|match|any]

As Kafka's AclCommand (with --bootstrap-server, through the brokers' CreateAcls,
DescribeAcls and DeleteAcls): every principal given gets every operation (default All)
from every host (default *) on every resource named. --list without a resource lists
every ACL; --remove without principals removes every ACL of the resources named, after
asking (y/n) unless --force. `match` (list, remove) selects the ACLs that apply to the
names given, wildcard and prefixed ones included; `any` every pattern type. Lines are
Kafka's (broker/tools/README.md). Exit codes: 0 done, 1 an error was reported, 2 bad
arguments.
"""

from __future__ import annotations

import argparse
import itertools
import sys

from broker.client.admin import AdminClient
from broker.security.acl import (
    CLUSTER_NAME,
    SUPPORTED_OPERATIONS,
    WILDCARD,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclError,
    Operation,
    PatternType,
    Permission,
    ResourcePattern,
    ResourceType,
    operation_of,
    parse_principal,
)
from broker.tools import admin_command
from broker.tools.admin_command import CommandError
from broker.tools.output import Output

PATTERN_TYPES = {
    "literal": PatternType.LITERAL,
    "prefixed": PatternType.PREFIXED,
    "match": PatternType.MATCH,
    "any": PatternType.ANY,
}


def main(argv: list[str] | None = None) -> int:
    return admin_command.main(argv, _parser(), _usage_problem, _run)


def _run(admin: AdminClient, args, out: Output) -> None:
    if args.add:
        _add(admin, args, out)
    elif args.remove:
        _remove(admin, args, out)
    else:
        _list(admin, args, out)


# -- what the options say -------------------------------------------------------------------


def _resources(args) -> list[tuple[ResourceType, str]]:
    named = [(ResourceType.TOPIC, t) for t in args.topic or []]
    named += [(ResourceType.GROUP, g) for g in args.group or []]
    named += [(ResourceType.TRANSACTIONAL_ID, t) for t in args.transactional_id or []]
    if args.cluster:
        named.append((ResourceType.CLUSTER, CLUSTER_NAME))
    return named


def _entries(args) -> list[AccessControlEntry]:
    """Every (principal, host, operation) the options name, allowed and denied."""
    operations = [operation_of(op) for op in args.operation or ["All"]]
    entries = []
    for permission, principals, hosts in (
        (Permission.ALLOW, args.allow_principal, args.allow_host),
        (Permission.DENY, args.deny_principal, args.deny_host),
    ):
        for principal, host, op in itertools.product(
            principals or [], hosts or [WILDCARD], operations
        ):
            entries.append(AccessControlEntry(principal, host, op, permission))
    return entries


def _pattern_type(args) -> PatternType:
    return PATTERN_TYPES[args.resource_pattern_type or "literal"]


# -- actions ---------------------------------------------------------------------------------


def _add(admin: AdminClient, args, out: Output) -> None:
    entries = _entries(args)
    for resource_type, name in _resources(args):
        pattern = ResourcePattern(resource_type, name, _pattern_type(args))
        supported = SUPPORTED_OPERATIONS[resource_type]
        wrong = sorted({e.operation for e in entries} - {Operation.ALL, *supported})
        if wrong:
            raise CommandError(
                f"ResourceType {resource_type.name} only supports operations "
                f"{','.join(op.name for op in (Operation.ALL, *supported))}; "
                f"not {','.join(op.name for op in wrong)}"
            )
        out.line(f"Adding ACLs for resource `{_pattern_text(pattern)}`: ")
        for entry in entries:
            out.line(f" \t{_entry_text(entry)} ")
        out.line()
        admin.create_acls([AclBinding(pattern, e) for e in entries])
        _raise_first_error(admin)
    _list(admin, args, out)


def _remove(admin: AdminClient, args, out: Output) -> None:
    entries = _entries(args)
    for resource_type, name in _resources(args):
        pattern_filter = AclBindingFilter(resource_type, name, _pattern_type(args))
        if entries:
            filters = [
                AclBindingFilter(
                    resource_type, name, pattern_filter.pattern_type,
                    e.principal, e.host, e.operation, e.permission,
                )
                for e in entries
            ]  # fmt: skip
            question = "Are you sure you want to remove ACLs: \n" + "".join(
                f" \t{_entry_text(e)} \n" for e in entries
            )
            question += f" from resource filter `{_pattern_text(pattern_filter)}`? (y/n)"
        else:
            filters = [pattern_filter]
            question = (
                "Are you sure you want to delete all ACLs for resource filter "
                f"`{_pattern_text(pattern_filter)}`? (y/n)"
            )
        if not args.force and not _confirmed(question, out):
            out.line("Nothing removed.")
            continue
        admin.delete_acls(filters)
        _raise_first_error(admin)
    _list(admin, args, out)


def _list(admin: AdminClient, args, out: Output) -> None:
    resources = _resources(args)
    if resources:
        filters = [AclBindingFilter(t, n, _pattern_type(args)) for t, n in resources]
    else:
        kind = args.resource_pattern_type
        filters = [AclBindingFilter(pattern_type=PATTERN_TYPES[kind] if kind else PatternType.ANY)]
    by_pattern: dict[ResourcePattern, list[AccessControlEntry]] = {}
    for f in filters:
        for binding in admin.describe_acls(f):
            by_pattern.setdefault(binding.pattern, []).append(binding.entry)
    for pattern, entries in by_pattern.items():
        out.line(f"Current ACLs for resource `{_pattern_text(pattern)}`: ")
        for entry in entries:
            out.line(f" \t{_entry_text(entry)} ")
        out.line()


def _raise_first_error(admin: AdminClient) -> None:
    for code, message in admin.last_errors.values():
        raise CommandError(message or code.name)


def _confirmed(question: str, out: Output) -> bool:
    out.line(question)
    answer = sys.stdin.readline().strip().lower()
    return answer in ("y", "yes")


# -- Kafka's texts ----------------------------------------------------------------------------


def _pattern_text(p: ResourcePattern | AclBindingFilter) -> str:
    return (
        f"ResourcePattern(resourceType={p.resource_type.name}, name={p.name}, "
        f"patternType={p.pattern_type.name})"
    )


def _entry_text(e: AccessControlEntry) -> str:
    return (
        f"(principal={e.principal}, host={e.host}, operation={e.operation.name}, "
        f"permissionType={e.permission.name})"
    )


# -- arguments --------------------------------------------------------------------------------


def _principal(value: str) -> str:
    try:
        parse_principal(value)
    except AclError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return value


def _operation(value: str) -> str:
    try:
        operation_of(value)
    except AclError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return value


def _parser():
    parser = admin_command.parser("acls", "kafka-acls", "Add, list and remove ACLs.")
    actions = parser.add_argument_group("actions (exactly one)")
    actions.add_argument("--add", action="store_true", help="add ACLs")
    actions.add_argument("--remove", action="store_true", help="remove ACLs")
    actions.add_argument("--list", action="store_true", help="list ACLs")
    parser.add_argument("--force", action="store_true", help="remove without asking")
    for option, what in (("allow", "allowed"), ("deny", "denied")):
        parser.add_argument(
            f"--{option}-principal", action="append", type=_principal, metavar="PRINCIPAL",
            help=f"a principal {what} (User:NAME; User:* is everyone)",
        )  # fmt: skip
        parser.add_argument(
            f"--{option}-host", action="append", metavar="HOST",
            help=f"a host the {option} principals are {what} from (default *)",
        )  # fmt: skip
    parser.add_argument(
        "--operation", action="append", type=_operation, metavar="OPERATION",
        help="Read, Write, Create, Delete, Alter, Describe, ClusterAction, DescribeConfigs, "
        "AlterConfigs, IdempotentWrite or All (the default)",
    )  # fmt: skip
    parser.add_argument("--topic", action="append", metavar="TOPIC", help="a topic (* for any)")
    parser.add_argument("--group", action="append", metavar="GROUP", help="a consumer group")
    parser.add_argument("--cluster", action="store_true", help="the cluster")
    parser.add_argument("--transactional-id", action="append", metavar="ID")
    parser.add_argument(
        "--resource-pattern-type", choices=sorted(PATTERN_TYPES),
        help="literal (the default), prefixed; list and remove also match and any",
    )  # fmt: skip
    return parser


def _usage_problem(args) -> str | None:
    if sum((args.add, args.remove, args.list)) != 1:
        return "exactly one action is needed: --add, --remove or --list"
    principals = bool(args.allow_principal or args.deny_principal)
    if args.add and not principals:
        return "--add needs --allow-principal or --deny-principal"
    if (args.add or args.remove) and not _resources(args):
        return "a resource is needed: --topic, --group, --cluster or --transactional-id"
    if args.allow_host and not args.allow_principal:
        return "--allow-host goes with --allow-principal"
    if args.deny_host and not args.deny_principal:
        return "--deny-host goes with --deny-principal"
    if args.list and principals:
        return "--list takes no principals"
    if args.add and args.resource_pattern_type in ("match", "any"):
        return f"--add takes a literal or prefixed pattern, not {args.resource_pattern_type}"
    if args.force and not args.remove:
        return "--force goes with --remove"
    return None
