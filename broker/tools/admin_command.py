"""What the cluster tools (topics, configs, reassign-partitions, leader-election) share:
the connection options, the program name Kafka's users see, an AdminClient for the run,
and Kafka's way of ending: an error printed as `Error: ...` and exit code 1."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable

from broker.client.admin import AdminClient
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


def parser(module: str, script: str, description: str) -> argparse.ArgumentParser:
    """An argument parser with the options every cluster tool takes."""
    p = argparse.ArgumentParser(
        prog=prog(module, script),
        description=description,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--bootstrap-server",
        required=True,
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
    return p


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
    out = Output()
    try:
        with AdminClient(
            args.bootstrap_server, client_id=CLIENT_ID, request_timeout_ms=args.timeout
        ) as admin:
            action(admin, args, out)
    except (KafkaError, CommandError, ValueError) as exc:
        out.error(str(exc))
    return 1 if out.failed else 0
