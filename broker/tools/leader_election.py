"""kafka-leader-election: give partitions back to their preferred leaders, or elect any
live replica of partitions without a leader (unclean: acknowledged records may be lost).

    python -m broker.tools leader-election --bootstrap-server HOST:PORT
        --election-type PREFERRED|UNCLEAN
        (--topic T --partition P | --all-topic-partitions | --path-to-json-file F)

The JSON file is Kafka's: `{"partitions": [{"topic": "t", "partition": 0}, ...]}`. The
election is the controller's (ElectLeaders); lines and messages are Kafka's
(broker/tools/README.md). Exit codes: 0 done, 1 a partition could not be elected or
another error, 2 bad arguments (a file that is not such JSON included).
"""

from __future__ import annotations

import argparse
import json
import sys

from broker.client.admin import AdminClient, ElectionType
from broker.protocol.errors import ErrorCode, error_for
from broker.protocol.topic import topic_name_problem
from broker.tools import admin_command
from broker.tools.output import Output


def main(argv: list[str] | None = None) -> int:
    return admin_command.main(argv, _parser(), _usage_problem, _elect)


def _usage_problem(args) -> str | None:
    """What is wrong with the options; reads the JSON file into `args.partitions`."""
    scopes = [args.topic is not None, args.all_topic_partitions, args.path_to_json_file]
    if sum(map(bool, scopes)) != 1:
        return (
            "exactly one of --topic (with --partition), --all-topic-partitions and "
            "--path-to-json-file is needed"
        )
    if (args.topic is None) != (args.partition is None):
        return "--topic and --partition go together"
    args.partitions = None
    if args.topic is not None:
        args.partitions = [(args.topic, args.partition)]
    elif args.path_to_json_file is not None:
        try:
            args.partitions = partitions_file(args.path_to_json_file)
        except ValueError as exc:
            return f"--path-to-json-file {args.path_to_json_file}: {exc}"
    return None


def _elect(admin: AdminClient, args, out: Output) -> None:
    election = ElectionType[args.election_type]
    outcome = admin.elect_leaders(election, args.partitions, timeout_ms=args.timeout)
    messages = admin.last_errors
    done = [tp for tp, code in outcome.items() if code == ErrorCode.NONE]
    noop = [tp for tp, code in outcome.items() if code == ErrorCode.ELECTION_NOT_NEEDED]
    failed = [tp for tp in outcome if tp not in done and tp not in noop]
    if done:
        out.line(
            f"Successfully completed leader election ({election.name}) for partitions "
            f"{_labels(done)}"
        )
    if noop:
        out.line(f"Valid replica already elected for partitions {_labels(noop)}")
    for tp in sorted(failed):
        code, message = messages[tp]
        out.line(
            f"Error completing leader election ({election.name}) for partition: "
            f"{tp[0]}-{tp[1]}: {error_for(code, message)}"
        )
    if failed:
        out.error(f"{len(failed)} replica(s) could not be elected")


def _labels(partitions) -> str:
    return ", ".join(f"{t}-{p}" for t, p in sorted(partitions))


def partitions_file(path: str) -> list[tuple[str, int]]:
    """The partitions of Kafka's election JSON; ValueError saying what is wrong."""
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except OSError as exc:
        raise ValueError(f"cannot read it: {exc.strerror}") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON: {exc}") from None
    entries = data.get("partitions") if isinstance(data, dict) else None
    if not isinstance(entries, list) or not entries:
        raise ValueError('expected {"partitions": [{"topic": T, "partition": P}, ...]}')
    found: list[tuple[str, int]] = []
    for entry in entries:
        topic = entry.get("topic") if isinstance(entry, dict) else None
        partition = entry.get("partition") if isinstance(entry, dict) else None
        if not isinstance(topic, str) or type(partition) is not int or partition < 0:
            raise ValueError(f'{json.dumps(entry)} is not {{"topic": T, "partition": P}}')
        problem = topic_name_problem(topic)
        if problem:
            raise ValueError(f"topic {topic!r}: {problem}")
        found.append((topic, partition))
    duplicates = sorted({tp for tp in found if found.count(tp) > 1})
    if duplicates:
        raise ValueError(
            f"Replica election data contains duplicate partitions: {_labels(duplicates)}"
        )
    return found


def _election_type(value: str) -> str:
    name = value.upper()
    if name not in ElectionType.__members__:
        raise argparse.ArgumentTypeError(f"{value!r}: expected PREFERRED or UNCLEAN")
    return name


def _partition(value: str) -> int:
    if not value.isdigit():
        raise argparse.ArgumentTypeError(f"{value!r} is not a partition number >= 0")
    return int(value)


def _parser():
    parser = admin_command.parser(
        "leader-election",
        "kafka-leader-election",
        "Elect the preferred (or any live, unclean) replica as the leader of partitions.",
    )
    parser.add_argument(
        "--election-type",
        type=_election_type,
        required=True,
        metavar="PREFERRED|UNCLEAN",
        help="PREFERRED: the first replica, if live and in sync; UNCLEAN: any live replica "
        "of a partition without a leader",
    )
    parser.add_argument("--topic", metavar="TOPIC", help="the topic (with --partition)")
    parser.add_argument("--partition", type=_partition, metavar="P", help="its partition")
    parser.add_argument(
        "--all-topic-partitions", action="store_true", help="every partition of every topic"
    )
    parser.add_argument(
        "--path-to-json-file",
        metavar="FILE",
        help='the partitions, as {"partitions": [{"topic": T, "partition": P}, ...]}',
    )
    return parser


if __name__ == "__main__":
    sys.exit(main())
