"""kafka-transactions: see and repair transactions (KIP-664).

    python -m broker.tools transactions --bootstrap-server HOST:PORT [--command-config F] COMMAND
        list
        describe --transactional-id ID
        describe-producers --topic T --partition P
        find-hanging (--broker-id N | --topic T [--partition P]) [--max-transaction-timeout MIN]
        abort --topic T --partition P (--start-offset O |
              --producer-id PID --producer-epoch E --coordinator-epoch C)

As Kafka's TransactionsCommand: the same commands, options and table headers (columns
padded to their widest value, each followed by a tab). `find-hanging` takes, as Kafka,
the open transactions whose producer last wrote longer ago than the largest transaction
timeout, and reports those the coordinator does not have open on that partition (no
transactional id lists the producer, or its transaction does not name the partition).
`abort` writes an ABORT marker at the partition's leader with the producer's epoch and
coordinator epoch as DescribeProducers shows them (a coordinator epoch of -1 is sent as
0, as Kafka does); it needs CLUSTER_ACTION on the cluster. docs/contracts/transactions.md,
"Tools and visibility"; broker/tools/README.md. Exit codes: 0 done, 1 an error was
reported, 2 bad arguments.
"""

from __future__ import annotations

import argparse
import time
from collections import defaultdict
from collections.abc import Sequence

from broker.client.admin import AdminClient, ProducerState
from broker.protocol.errors import ErrorCode, KafkaError
from broker.tools import admin_command
from broker.tools.admin_command import CommandError
from broker.tools.output import Output

DEFAULT_MAX_TRANSACTION_TIMEOUT_MIN = 15  # Kafka's tool's default: transaction.max.timeout.ms

LIST_HEADERS = ("TransactionalId", "Coordinator", "ProducerId", "TransactionState")
DESCRIBE_HEADERS = (
    "CoordinatorId",
    "TransactionalId",
    "ProducerId",
    "ProducerEpoch",
    "TransactionState",
    "TransactionTimeoutMs",
    "CurrentTransactionStartTimeMs",
    "TransactionDurationMs",
    "TopicPartitions",
)
PRODUCERS_HEADERS = (
    "ProducerId",
    "ProducerEpoch",
    "LatestCoordinatorEpoch",
    "LastSequence",
    "LastTimestamp",
    "CurrentTransactionStartOffset",
)
HANGING_HEADERS = (
    "Topic",
    "Partition",
    "ProducerId",
    "ProducerEpoch",
    "CoordinatorEpoch",
    "StartOffset",
    "LastTimestamp",
    "Duration(min)",
)


def main(argv: list[str] | None = None) -> int:
    return admin_command.main(argv, _parser(), _usage_problem, _run)


def _parser() -> argparse.ArgumentParser:
    p = admin_command.parser(
        "transactions",
        "kafka-transactions",
        "Analyze the transactional state of producers in the cluster; detect and recover "
        "from hanging transactions.",
    )
    commands = p.add_subparsers(dest="command", metavar="COMMAND", required=True)
    commands.add_parser("list", help="list transactions")
    describe = commands.add_parser("describe", help="describe the state of a transactional id")
    describe.add_argument("--transactional-id", required=True)
    producers = commands.add_parser(
        "describe-producers", help="the active producers of a topic partition"
    )
    producers.add_argument("--topic", required=True)
    producers.add_argument("--partition", type=int, required=True)
    hanging = commands.add_parser("find-hanging", help="find hanging transactions")
    hanging.add_argument("--broker-id", type=int, help="search the partitions with a replica here")
    hanging.add_argument("--topic", help="topic to search")
    hanging.add_argument("--partition", type=int, help="partition (with --topic)")
    hanging.add_argument(
        "--max-transaction-timeout",
        type=int,
        default=DEFAULT_MAX_TRANSACTION_TIMEOUT_MIN,
        metavar="MINUTES",
        help="transactions whose producer wrote more recently than this are not searched "
        f"(default {DEFAULT_MAX_TRANSACTION_TIMEOUT_MIN})",
    )
    abort = commands.add_parser(
        "abort", help="abort a hanging transaction (needs ClusterAction on the cluster)"
    )
    abort.add_argument("--topic", required=True)
    abort.add_argument("--partition", type=int, required=True)
    abort.add_argument("--start-offset", type=int, help="the open transaction's first offset")
    abort.add_argument("--producer-id", type=int)
    abort.add_argument("--producer-epoch", type=int)
    abort.add_argument("--coordinator-epoch", type=int)
    return p


def _usage_problem(args) -> str | None:
    """Kafka's checks, in its words."""
    if args.command == "find-hanging":
        if args.topic is None and args.broker_id is None:
            return (
                "The `find-hanging` command requires either --topic or --broker-id to limit "
                "the scope of the search"
            )
        if args.partition is not None and args.topic is None:
            return "The --partition argument requires --topic to be provided"
        if args.max_transaction_timeout < 0:
            return f"--max-transaction-timeout {args.max_transaction_timeout} is negative"
    if args.command == "abort" and args.start_offset is None:
        if args.producer_id is None:
            return (
                "The transaction to abort must be identified either with --start-offset "
                "or with --producer-id, --producer-epoch, and --coordinator-epoch"
            )
        if args.producer_epoch is None:
            return "Missing required argument --producer-epoch"
        if args.coordinator_epoch is None:
            return "Missing required argument --coordinator-epoch"
    return None


def _run(admin: AdminClient, args, out: Output) -> None:
    COMMANDS[args.command](admin, args, out)


def table(out: Output, headers: Sequence[str], rows: list[Sequence[object]]) -> None:
    """Kafka's TransactionsCommand table: each column padded to its widest value and
    followed by a tab."""
    cells = [[str(v) for v in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    for row in [list(headers), *cells]:
        out.line("".join(v.ljust(w) + "\t" for v, w in zip(row, widths, strict=True)))


def _list(admin: AdminClient, args, out: Output) -> None:
    listed = admin.list_transactions()
    table(
        out,
        LIST_HEADERS,
        [(t.transactional_id, t.coordinator_id, t.producer_id, t.state) for t in listed],
    )


def _describe(admin: AdminClient, args, out: Output) -> None:
    txn_id = args.transactional_id
    try:
        d = admin.describe_transactions([txn_id])[txn_id]
    except KafkaError as exc:
        raise CommandError(
            f"Failed to describe transaction state of transactional-id `{txn_id}`: {exc}"
        ) from exc
    started = d.start_time_ms >= 0
    now = int(time.time() * 1000)
    row = (
        d.coordinator_id,
        txn_id,
        d.producer_id,
        d.producer_epoch,
        d.state,
        d.timeout_ms,
        d.start_time_ms if started else "None",
        now - d.start_time_ms if started else "None",
        ",".join(f"{t}-{p}" for t, p in d.partitions),
    )
    table(out, DESCRIBE_HEADERS, [row])


def _describe_producers(admin: AdminClient, args, out: Output) -> None:
    tp = (args.topic, args.partition)
    try:
        producers = admin.describe_producers([tp])[tp]
    except KafkaError as exc:
        raise CommandError(
            f"Failed to describe producers for partition {tp[0]}-{tp[1]} on leader: {exc}"
        ) from exc
    table(
        out,
        PRODUCERS_HEADERS,
        [
            (
                s.producer_id,
                s.producer_epoch,
                s.coordinator_epoch,
                s.last_sequence,
                s.last_timestamp,
                s.current_txn_start_offset if s.current_txn_start_offset >= 0 else "None",
            )
            for s in producers
        ],
    )


def _find_hanging(admin: AdminClient, args, out: Output) -> None:
    partitions = _partitions_to_search(admin, args)
    max_timeout_ms = args.max_transaction_timeout * 60_000
    now = int(time.time() * 1000)
    found = admin.describe_producers(partitions) if partitions else {}
    candidates = [
        (tp, s)
        for tp, states in sorted(found.items())
        for s in states
        if s.current_txn_start_offset >= 0 and now - s.last_timestamp > max_timeout_ms
    ]
    hanging = hanging_transactions(admin, candidates) if candidates else []
    table(
        out,
        HANGING_HEADERS,
        [
            (
                t,
                p,
                s.producer_id,
                s.producer_epoch,
                s.coordinator_epoch,
                s.current_txn_start_offset,
                s.last_timestamp,
                (now - s.last_timestamp) // 60_000,
            )
            for (t, p), s in hanging
        ],
    )


def _partitions_to_search(admin: AdminClient, args) -> list[tuple[str, int]]:
    if args.topic is not None and args.partition is not None:
        return [(args.topic, args.partition)]
    topics = [args.topic] if args.topic is not None else admin.list_topics()
    described = admin.describe_topics(topics)
    return [
        (name, info.partition)
        for name, description in sorted(described.items())
        for info in description.partitions
        if args.broker_id is None or args.broker_id in info.replicas
    ]


def hanging_transactions(
    admin: AdminClient, candidates: list[tuple[tuple[str, int], ProducerState]]
) -> list[tuple[tuple[str, int], ProducerState]]:
    """The candidates the coordinators do not have open on their partition: no
    transactional id lists the producer id, its id is unknown to its coordinator, or its
    transaction does not name the partition (a transaction in PrepareCommit/PrepareAbort
    names the partitions still waiting for their marker)."""
    by_producer: dict[int, list] = defaultdict(list)
    for candidate in candidates:
        by_producer[candidate[1].producer_id].append(candidate)
    ids = {
        t.producer_id: t.transactional_id for t in admin.list_transactions(producer_ids=by_producer)
    }
    hanging = []
    for producer_id, open_here in by_producer.items():
        txn_id = ids.get(producer_id)
        if txn_id is None:
            hanging += open_here
            continue
        try:
            described = admin.describe_transactions([txn_id])[txn_id]
        except KafkaError as exc:
            if exc.code != ErrorCode.TRANSACTIONAL_ID_NOT_FOUND:
                raise
            hanging += open_here
            continue
        hanging += [c for c in open_here if c[0] not in described.partitions]
    return sorted(hanging, key=lambda c: (c[0], c[1].producer_id))


def _abort(admin: AdminClient, args, out: Output) -> None:
    tp = (args.topic, args.partition)
    if args.start_offset is None:
        producer_id, epoch, coordinator_epoch = (
            args.producer_id,
            args.producer_epoch,
            args.coordinator_epoch,
        )
    else:
        try:
            producers = admin.describe_producers([tp])[tp]
        except KafkaError as exc:
            raise CommandError(
                f"Failed to validate producer state for partition {tp[0]}-{tp[1]}: {exc}"
            ) from exc
        match = [s for s in producers if s.current_txn_start_offset == args.start_offset]
        if not match:
            raise CommandError(
                f"Could not find any open transactions starting at offset {args.start_offset} "
                f"on partition {tp[0]}-{tp[1]}"
            )
        producer_id, epoch, coordinator_epoch = (
            match[0].producer_id,
            match[0].producer_epoch,
            match[0].coordinator_epoch,
        )
    # A producer whose first transaction hung has no coordinator epoch here (-1): 0 is at
    # or below any coordinator's, so the leader accepts the marker (as Kafka's tool).
    coordinator_epoch = max(coordinator_epoch, 0)
    try:
        admin.abort_transaction(tp, producer_id, epoch, coordinator_epoch)
    except KafkaError as exc:
        raise CommandError(
            f"Failed to abort transaction of producer {producer_id} (epoch {epoch}, "
            f"coordinator epoch {coordinator_epoch}) on {tp[0]}-{tp[1]}: {exc}"
        ) from exc


COMMANDS = {
    "list": _list,
    "describe": _describe,
    "describe-producers": _describe_producers,
    "find-hanging": _find_hanging,
    "abort": _abort,
}
