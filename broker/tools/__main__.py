"""`python -m broker.tools TOOL [options]`: the Kafka-shaped tools, one per name."""

from __future__ import annotations

import sys

from broker.tools import (
    acls,
    configs,
    console_consumer,
    console_producer,
    consumer_groups,
    consumer_perf,
    dump_log,
    leader_election,
    mirror_maker,
    producer_perf,
    reassign_partitions,
    topics,
    transactions,
    zk_offset_checker,
)

# name -> main(argv) -> exit code; the name is Kafka's script without `kafka-` and `.sh`.
TOOLS = {
    "acls": acls.main,
    "consumer-groups": consumer_groups.main,
    "consumer-offset-checker": zk_offset_checker.main,  # Kafka 0.8's, for ZooKeeper groups
    "dump-log": dump_log.main,
    "console-producer": console_producer.main,
    "console-consumer": console_consumer.main,
    "producer-perf-test": producer_perf.main,
    "consumer-perf-test": consumer_perf.main,
    "mirror-maker": mirror_maker.main,
    "configs": configs.main,
    "leader-election": leader_election.main,
    "reassign-partitions": reassign_partitions.main,
    "topics": topics.main,
    "transactions": transactions.main,
}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] not in TOOLS:
        names = ", ".join(sorted(TOOLS))
        problem = f"unknown tool {argv[0]!r}" if argv and argv[0] not in ("-h", "--help") else ""
        print(f"usage: python -m broker.tools TOOL [options]  (tools: {names})", file=sys.stderr)
        if problem:
            print(f"error: {problem}", file=sys.stderr)
            return 2
        return 0 if argv else 2
    return TOOLS[argv[0]](argv[1:])


if __name__ == "__main__":
    sys.exit(main())
