"""kafka-configs: describe and change the dynamic configs of topics and brokers, and
users' SCRAM credentials (user_credentials.py, also through --zookeeper before any broker
runs).

    python -m broker.tools configs --bootstrap-server HOST:PORT --describe
        --entity-type topics|brokers [--entity-name NAME | --entity-default] [--all]
    ... --alter --entity-type topics|brokers (--entity-name NAME | --entity-default)
        [--add-config K=V[,K=V...]] [--delete-config K[,K...]]
    ... --alter --entity-type users --entity-name alice
        --add-config 'SCRAM-SHA-512=[iterations=8192,password=alice-secret]'
    python -m broker.tools configs --zookeeper HOST:PORT[/chroot] --entity-type users ...
    python -m broker.tools configs --credentials-file scram.json --entity-type users ...

A change is incremental (IncrementalAlterConfigs: the keys named are set or deleted, the
rest stays), asked of the broker it concerns (a broker's own configs) or of any (topics,
the cluster-wide broker default). Lines and messages are Kafka's (broker/tools/README.md).
Exit codes: 0 done, 1 an error was reported, 2 bad arguments.
"""

from __future__ import annotations

import argparse
import sys

from broker.client.admin import (
    AdminClient,
    AlterConfigOp,
    ConfigEntry,
    ConfigResource,
    ConfigResourceType,
    ConfigSource,
)
from broker.protocol.topic import topic_name_problem
from broker.security.scram import ScramError
from broker.tools import admin_command, user_credentials
from broker.tools.admin_command import CommandError
from broker.tools.output import Output

USERS = "users"

ENTITY_TYPES = {"topics": ConfigResourceType.TOPIC, "brokers": ConfigResourceType.BROKER}
# Without --all, Kafka shows the values set on the entity itself.
_OWN_SOURCE = {
    ConfigResourceType.TOPIC: ConfigSource.DYNAMIC_TOPIC_CONFIG,
    ConfigResourceType.BROKER: ConfigSource.DYNAMIC_BROKER_CONFIG,
}


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.zookeeper is None and args.credentials_file is None:
        return admin_command.main(argv, parser, _usage_problem, _run)
    problem = _usage_problem(args)
    if problem:
        parser.error(problem)
    out = Output()
    try:
        if args.zookeeper is not None and args.alter:
            changes = _user_changes(args)
            user_credentials.zk_alter(args.zookeeper, args.entity_name, changes, out)
        elif args.zookeeper is not None:
            user_credentials.zk_show(args.zookeeper, args.entity_name, out)
        elif args.alter:
            changes = _user_changes(args)
            user_credentials.file_alter(args.credentials_file, args.entity_name, changes, out)
        else:
            user_credentials.file_show(args.credentials_file, args.entity_name, out)
    except (CommandError, TimeoutError, OSError, ValueError, ScramError) as exc:
        out.error(str(exc))
    return 1 if out.failed else 0


def _user_changes(args) -> list:
    added = dict(pair for group in args.add_config or [] for pair in group)
    deleted = [key for group in args.delete_config or [] for key in group]
    return user_credentials.scram_changes(args.entity_name, added, deleted)


def _run(admin: AdminClient, args, out: Output) -> None:
    if args.entity_type == USERS:
        if args.alter:
            user_credentials.alter(admin, args.entity_name, _user_changes(args), out)
        else:
            user_credentials.show(admin, args.entity_name, out)
        return
    kind = ENTITY_TYPES[args.entity_type]
    if args.alter:
        _alter(admin, _resource(kind, args), args, out)
        return
    if args.entity_name is not None or args.entity_default:
        resources = [_resource(kind, args)]
    elif kind == ConfigResourceType.TOPIC:
        resources = [ConfigResource(kind, t) for t in admin.list_topics()]
    else:
        brokers = admin.describe_cluster().brokers
        resources = [ConfigResource(kind, str(b.node_id)) for b in brokers]
        resources.append(ConfigResource(kind, ""))
    for resource in resources:
        _describe(admin, resource, args.all, out)


def _resource(kind: ConfigResourceType, args) -> ConfigResource:
    return ConfigResource(kind, "" if args.entity_default else args.entity_name)


def _describe(admin: AdminClient, resource: ConfigResource, everything: bool, out: Output):
    entries = admin.describe_configs([resource])[resource]
    if resource.name == "":
        out.line("Default configs for brokers in the cluster are:")
        own = ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
    else:
        kind = "topic" if resource.type == ConfigResourceType.TOPIC else "broker"
        out.line(f"{'All' if everything else 'Dynamic'} configs for {kind} {resource.name} are:")
        own = _OWN_SOURCE[resource.type]
    for entry in entries:
        if everything or entry.source == own:
            out.line(f"  {entry_line(entry)}")


def entry_line(entry: ConfigEntry) -> str:
    """`name=value sensitive=false synonyms={SOURCE:name=value, ...}`, as Kafka prints it."""
    synonyms = ", ".join(f"{s.source.name}:{s.name}={_text(s.value)}" for s in entry.synonyms)
    sensitive = str(entry.sensitive).lower()
    return f"{entry.name}={_text(entry.value)} sensitive={sensitive} synonyms={{{synonyms}}}"


def _text(value: str | None) -> str:
    return "null" if value is None else value


def _alter(admin: AdminClient, resource: ConfigResource, args, out: Output) -> None:
    added = dict(pair for group in args.add_config or [] for pair in group)
    deleted = [key for group in args.delete_config or [] for key in group]
    if deleted:
        # As Kafka's tool: deleting a key the entity does not set is a mistake worth telling.
        current = admin.describe_configs([resource], include_synonyms=False)[resource]
        own = (
            ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
            if resource.name == ""
            else _OWN_SOURCE[resource.type]
        )
        set_here = {e.name for e in current if e.source == own}
        missing = [k for k in deleted if k not in set_here]
        if missing:
            raise CommandError(f"Invalid config(s): {','.join(missing)}")
    ops = [AlterConfigOp(k, "SET", v) for k, v in added.items()]
    ops += [AlterConfigOp(k, "DELETE") for k in deleted]
    admin.incremental_alter_configs({resource: ops})
    if admin.last_errors:
        ((code, message),) = admin.last_errors.values()
        raise CommandError(message or code.name)
    if resource.name == "":
        out.line("Completed updating default config for brokers in the cluster.")
    else:
        kind = "topic" if resource.type == ConfigResourceType.TOPIC else "broker"
        out.line(f"Completed updating config for {kind} {resource.name}.")


# -- arguments -----------------------------------------------------------------------------


def config_pairs(value: str) -> list[tuple[str, str]]:
    """`k1=v1,k2=[v1,v2]`: Kafka's --add-config (square brackets around a value holding
    commas)."""
    pairs, rest = [], value
    while rest:
        key, sep, rest = rest.partition("=")
        if not sep or not key.strip() or "," in key:
            raise argparse.ArgumentTypeError(
                f"{value!r}: expected KEY=VALUE[,KEY=VALUE...] (a value with commas in [])"
            )
        if rest.startswith("["):
            end = rest.find("]")
            if end < 0:
                raise argparse.ArgumentTypeError(f"{value!r}: '[' without ']'")
            val, rest = rest[1:end], rest[end + 1 :]
            if rest and not rest.startswith(","):
                raise argparse.ArgumentTypeError(f"{value!r}: expected ',' after ']'")
            rest = rest[1:]
        else:
            val, _, rest = rest.partition(",")
        pairs.append((key.strip(), val))
    return pairs


def config_keys(value: str) -> list[str]:
    keys = [k.strip() for k in value.split(",")]
    if not all(keys):
        raise argparse.ArgumentTypeError(f"{value!r}: expected KEY[,KEY...]")
    return keys


def _parser():
    parser = admin_command.parser(
        "configs",
        "kafka-configs",
        "Describe and change the dynamic configs of topics and brokers, and users' SCRAM "
        "credentials.",
        bootstrap_required=False,
    )
    parser.add_argument(
        "--zookeeper",
        metavar="HOST:PORT[/CHROOT]",
        help="users only: write SCRAM credentials to the cluster's ZooKeeper directly "
        "(the first ones, before any broker runs)",
    )
    parser.add_argument(
        "--credentials-file",
        metavar="FILE",
        help="users only: write SCRAM credentials to a single broker's "
        "sasl.scram.credentials.file directly (the first ones, before the broker runs)",
    )
    actions = parser.add_argument_group("actions (exactly one)")
    actions.add_argument("--describe", action="store_true", help="show configs")
    actions.add_argument("--alter", action="store_true", help="set or delete configs")
    parser.add_argument("--entity-type", choices=sorted([*ENTITY_TYPES, USERS]), required=True)
    parser.add_argument(
        "--entity-name",
        metavar="NAME",
        help="the topic, the broker id or the user (describe: all)",
    )
    parser.add_argument(
        "--entity-default",
        action="store_true",
        help="brokers: the cluster-wide default of every broker",
    )
    parser.add_argument(
        "--all", action="store_true", help="describe: every key, not only those set"
    )
    parser.add_argument(
        "--add-config",
        action="append",
        type=config_pairs,
        metavar="K=V[,K=V...]",
        help="alter: keys to set (a value with commas in square brackets)",
    )
    parser.add_argument(
        "--delete-config",
        action="append",
        type=config_keys,
        metavar="K[,K...]",
        help="alter: keys to remove (back to the inherited value)",
    )
    return parser


def _usage_problem(args) -> str | None:
    if args.describe == args.alter:
        return "exactly one action is needed: --describe or --alter"
    ways = [args.bootstrap_server, args.zookeeper, args.credentials_file]
    if sum(way is not None for way in ways) != 1:
        return "exactly one of --bootstrap-server, --zookeeper and --credentials-file is needed"
    if args.bootstrap_server is None and args.entity_type != USERS:
        return (
            "--zookeeper and --credentials-file go with --entity-type users only "
            "(other configs: --bootstrap-server)"
        )
    if args.entity_type == USERS:
        return _users_usage_problem(args)
    if args.entity_name is not None and args.entity_default:
        return "--entity-name and --entity-default exclude each other"
    if args.entity_default and args.entity_type != "brokers":
        return "--entity-default goes with --entity-type brokers"
    if args.entity_name is not None:
        if args.entity_type == "topics":
            problem = topic_name_problem(args.entity_name)
            if problem:
                return f"--entity-name {args.entity_name!r}: {problem}"
        elif not args.entity_name.isdigit():
            return f"--entity-name {args.entity_name!r}: a broker id is a number >= 0"
    if args.describe and (args.add_config or args.delete_config):
        return "--describe takes no --add-config or --delete-config"
    if args.alter:
        if args.entity_name is None and not args.entity_default:
            return "--alter needs --entity-name (or --entity-default for brokers)"
        if not (args.add_config or args.delete_config):
            return "--alter needs --add-config or --delete-config"
        if args.all:
            return "--alter takes no --all"
        added = {k for group in args.add_config or [] for k, _ in group}
        both = sorted(added & {k for group in args.delete_config or [] for k in group})
        if both:
            return f"keys both added and deleted: {', '.join(both)}"
    return None


def _users_usage_problem(args) -> str | None:
    if args.entity_default:
        return "--entity-default is not supported for users (no default SCRAM credentials)"
    if args.entity_name == "":
        return "--entity-name must not be empty"
    if args.all:
        return "--all does not go with --entity-type users"
    if args.describe and (args.add_config or args.delete_config):
        return "--describe takes no --add-config or --delete-config"
    if args.alter:
        if args.entity_name is None:
            return "--alter needs --entity-name"
        if not (args.add_config or args.delete_config):
            return "--alter needs --add-config or --delete-config"
        try:
            _user_changes(args)
        except CommandError as exc:
            return str(exc)
    return None


if __name__ == "__main__":
    sys.exit(main())
