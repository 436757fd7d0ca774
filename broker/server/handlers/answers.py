"""Per-topic and per-partition answers, in the shape the responses declare them.

Many APIs answer a list of topics, each with a list of partitions (or one entry per
topic). The handlers say what one partition's (or topic's) answer is; these functions
put the answers under their topics:
- `per_partition`: the request's topics and partitions, in its order (ListOffsets,
  OffsetForLeaderEpoch, Fetch; `partition_errors` for OffsetCommit and OffsetDelete);
- `by_topic`: results keyed by (topic, partition), sorted and grouped under their topics
  (AlterPartitionReassignments, ElectLeaders);
- `topic_results`: a name, an error code and a message per topic (CreateTopics,
  DeleteTopics, CreatePartitions).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol

from broker.protocol.errors import ErrorCode


def per_partition(
    topics: list[dict], answer: Callable[[str, dict], dict], topic_key: str = "name"
) -> list[dict]:
    """`{topic_key: name, "partitions": [answer(name, partition), ...]}` for each of the
    request's `topics` (named by `topic_key`, their partitions under "partitions"), in the
    request's order: a topic asked twice is answered twice."""
    return [
        {topic_key: t[topic_key], "partitions": [answer(t[topic_key], p) for p in t["partitions"]]}
        for t in topics
    ]


def partition_errors(topics: list[dict], errors: Mapping[tuple[str, int], ErrorCode]) -> list[dict]:
    """Each partition asked for (`{"name", "partitions": [{"partition_index"}]}`) with
    its error code from `errors`."""
    return per_partition(
        topics,
        lambda name, p: {
            "partition_index": p["partition_index"],
            "error_code": errors[(name, p["partition_index"])],
        },
    )


def by_topic(
    results: Mapping[tuple[str, int], Any],
    entry: Callable[[int, Any], dict],
    topic_key: str = "name",
    partitions_key: str = "partitions",
) -> list[dict]:
    """`{topic_key: topic, partitions_key: [entry(partition, result), ...]}` per topic, in
    the order of the sorted (topic, partition) keys of `results`."""
    grouped: dict[str, list[dict]] = {}
    for topic, partition in sorted(results):
        grouped.setdefault(topic, []).append(entry(partition, results[(topic, partition)]))
    return [{topic_key: topic, partitions_key: entries} for topic, entries in grouped.items()]


class _TopicError(Protocol):
    code: ErrorCode
    message: str


def topic_results(
    names: Iterable[str],
    errors: Mapping[str, _TopicError | None],
    no_error: ErrorCode = ErrorCode.NONE,
) -> list[dict]:
    """`{"name", "error_code", "error_message"}` per name, in order: its error in `errors`
    (a TopicError), or `no_error` and no message where it has none."""
    results = []
    for name in names:
        error = errors.get(name)
        results.append(
            {
                "name": name,
                "error_code": error.code if error else no_error,
                "error_message": error.message if error else None,
            }
        )
    return results
