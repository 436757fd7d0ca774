"""What a mirror left behind: every record of the source topics compared with the target's,
as multisets of (key, value, headers, timestamp), so an operator (and the tests) see
records missing at the target and records the target holds more than once (the
at-least-once duplicates a restarted mirror writes). Both sides are read at
read_committed, as the mirror reads the source: aborted records are not missing."""

from __future__ import annotations

from collections import Counter
from typing import NamedTuple

from broker.client.security import SecurityConfig
from broker.client.simple_consumer import SimpleConsumer


class TopicComparison(NamedTuple):
    topic: str
    source: int  # records at the source
    target: int  # records at the target
    missing: int  # source records the target does not hold
    duplicates: int  # target records beyond the source's count of the same record
    unknown: int  # target records the source does not hold at all


def fingerprints(consumer: SimpleConsumer, topic: str) -> Counter:
    found: Counter = Counter()
    for partition in consumer.partitions_for(topic):
        offset = consumer.earliest_offset(topic, partition)
        end = consumer.latest_offset(topic, partition)
        while offset < end:
            result = consumer.fetch(topic, partition, offset)
            result.raise_for_error()
            for r in result.records():
                if r.offset < end:
                    found[(r.key, r.value, tuple(r.headers), r.timestamp)] += 1
            if result.next_offset <= offset:
                break
            offset = result.next_offset
    return found


def compare(
    source_bootstrap: str,
    target_bootstrap: str,
    topics: list[str],
    source_security: SecurityConfig | None = None,
    target_security: SecurityConfig | None = None,
) -> list[TopicComparison]:
    results = []
    with (
        SimpleConsumer(
            source_bootstrap, security=source_security, isolation_level="read_committed"
        ) as source,
        SimpleConsumer(
            target_bootstrap, security=target_security, isolation_level="read_committed"
        ) as target,
    ):
        for topic in topics:
            theirs, ours = fingerprints(source, topic), fingerprints(target, topic)
            missing = sum((theirs - ours).values())
            beyond = ours - theirs
            unknown = sum(n for record, n in beyond.items() if record not in theirs)
            results.append(
                TopicComparison(
                    topic,
                    sum(theirs.values()),
                    sum(ours.values()),
                    missing,
                    sum(beyond.values()) - unknown,
                    unknown,
                )
            )
    return results
