"""What the cluster tools (topics, configs, reassign-partitions, leader-election) share:
the connection options (`--command-config FILE`: the admin client's properties, the
security settings of broker/client/security.py), the program name Kafka's users see, an
AdminClient for the run, and Kafka's way of ending: an error printed as `Error: ...` and
exit code 1."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable

from broker.client.admin import AdminClient
from broker.client.security import command_security
from broker.protocol.errors import KafkaError
from broker.tools.output import Output

DEFAULT_TIMEOUT_MS = 30000  # Kafka's admin client's request timeout
CLIENT_ID = "kafka-hourly-admin"


class CommandError(Exception):
    """A refusal the tool itself found (a bad plan, a topic that does not exist): printed
    as `Error: ...`, exit code 1, nothing changed."""


def prog(module: str, script: str) -> str:
    """`kafka-<tool>` when run as the console script, else `python -m broker.tools <tool>`."""
    return script if os.path.basename(sys.argv[0]) == script else f"python -m broker.tools {module}"


def parser(
    module: str, script: str, description: str, bootstrap_required: bool = True
) -> argparse.ArgumentParser:
    """An argument parser with the options every cluster tool takes (`bootstrap_required`
    False: the tool has another way in, and checks itself that one is given)."""
    p = argparse.ArgumentParser(
        prog=prog(module, script),
        description=description,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--bootstrap-server",
        required=bootstrap_required,
        metavar="HOST:PORT",
        help="brokers to connect to (HOST:PORT[,HOST:PORT...])",
    )
    p.add_argument(
        "--timeout",
        type=positive_int,
        default=DEFAULT_TIMEOUT_MS,
        metavar="MS",
        help=f"how long to wait for the brokers per request (default {DEFAULT_TIMEOUT_MS})",
    )
    add_command_config(p)
    return p


def add_command_config(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--command-config",
        metavar="FILE",
        help="admin client properties: security.protocol, sasl.mechanism, sasl.jaas.config, "
        "ssl.truststore.location, ... (Kafka's and librdkafka's names)",
    )


def positive_int(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number <= 0:
        raise argparse.ArgumentTypeError(f"{value!r} is not a positive integer")
    return number


def main(
    argv: list[str] | None,
    parser: argparse.ArgumentParser,
    check: Callable[[argparse.Namespace], str | None],
    action: Callable[[AdminClient, argparse.Namespace, Output], None],
) -> int:
    """A tool's whole run: parse `argv`; `check(args)` says what is wrong with them (exit
    2 with argparse's usage); then `action(admin, args, out)` with an AdminClient on
    `--bootstrap-server`, whose errors become `Error: ...` and exit code 1."""
    args = parser.parse_args(argv)
    problem = check(args)
    if problem:
        parser.error(problem)
    security = command_security(parser, args.command_config)
    out = Output()
    try:
        with AdminClient(
            args.bootstrap_server,
            client_id=CLIENT_ID,
            request_timeout_ms=args.timeout,
            security=security,
        ) as admin:
            action(admin, args, out)
    except (KafkaError, CommandError, ValueError) as exc:
        out.error(str(exc))
    return 1 if out.failed else 0
