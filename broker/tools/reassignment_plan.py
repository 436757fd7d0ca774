"""The JSON files of kafka-reassign-partitions, as Kafka writes and reads them:

    topics to move:  {"version":1,"topics":[{"topic":"t"},...]}
    a plan:          {"version":1,"partitions":[{"topic":"t","partition":0,
                      "replicas":[1,2],"log_dirs":["any","any"]},...]}

Read with every problem of the file itself found before the cluster is asked (PlanError,
naming the entry): not JSON, another version, missing or mistyped fields, an empty
replica list, duplicate replicas, a partition listed twice, log dirs other than "any"
(replicas are not moved between a broker's directories here)."""

from __future__ import annotations

import json

from broker.protocol.topic import topic_name_problem

# (topic, partition) -> replicas, the first being the preferred leader.
Plan = dict[tuple[str, int], list[int]]
ANY_LOG_DIR = "any"


class PlanError(ValueError):
    """The file is not a valid plan (or topic list); the message says where."""


def label(tp: tuple[str, int]) -> str:
    return f"{tp[0]}-{tp[1]}"


def dump_plan(plan: Plan) -> str:
    """Kafka's one-line JSON of a plan, partitions in order."""
    return json.dumps(
        {
            "version": 1,
            "partitions": [
                {
                    "topic": t,
                    "partition": p,
                    "replicas": replicas,
                    "log_dirs": [ANY_LOG_DIR] * len(replicas),
                }
                for (t, p), replicas in sorted(plan.items())
            ],
        },
        separators=(",", ":"),
    )


def read_topics_to_move(path: str) -> list[str]:
    data = _load(path)
    entries = data.get("topics") if isinstance(data, dict) else None
    if not isinstance(entries, list) or not entries:
        raise PlanError(f'{path}: expected {{"version":1,"topics":[{{"topic":"t"}},...]}}')
    _check_version(path, data)
    topics = []
    for entry in entries:
        topic = entry.get("topic") if isinstance(entry, dict) else None
        _check_topic(path, entry, topic)
        if topic in topics:
            raise PlanError(f"{path}: topic {topic!r} is listed twice")
        topics.append(topic)
    return topics


def read_plan(path: str) -> Plan:
    data = _load(path)
    entries = data.get("partitions") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        raise PlanError(
            f'{path}: expected {{"version":1,"partitions":[{{"topic":"t","partition":0,'
            '"replicas":[1,2]},...]}'
        )
    if not entries:
        raise PlanError(f"{path}: Partition reassignment list cannot be empty")
    _check_version(path, data)
    plan: Plan = {}
    for entry in entries:
        if not isinstance(entry, dict):
            raise PlanError(f"{path}: {json.dumps(entry)} is not a partition's entry")
        topic, partition, replicas = (
            entry.get("topic"),
            entry.get("partition"),
            entry.get("replicas"),
        )
        _check_topic(path, entry, topic)
        if type(partition) is not int or partition < 0:
            raise PlanError(f'{path}: {json.dumps(entry)}: "partition" must be a number >= 0')
        tp = (topic, partition)
        if not isinstance(replicas, list) or not all(type(b) is int and b >= 0 for b in replicas):
            raise PlanError(
                f'{path}: partition {label(tp)}: "replicas" must be a list of broker ids'
            )
        if not replicas:
            raise PlanError(f"{path}: partition {label(tp)} has no replicas")
        if len(set(replicas)) != len(replicas):
            raise PlanError(
                f"{path}: partition {label(tp)} has duplicate replicas: "
                + ",".join(str(b) for b in replicas)
            )
        dirs = entry.get("log_dirs", [ANY_LOG_DIR] * len(replicas))
        if not isinstance(dirs, list) or len(dirs) != len(replicas):
            raise PlanError(
                f'{path}: partition {label(tp)}: "log_dirs" must name one directory per replica'
            )
        if any(d != ANY_LOG_DIR for d in dirs):
            raise PlanError(
                f'{path}: partition {label(tp)}: log dirs other than "any" are not supported '
                "(replicas are not moved between a broker's log directories)"
            )
        if tp in plan:
            raise PlanError(f"{path}: partition {label(tp)} is listed twice")
        plan[tp] = list(replicas)
    return plan


def _load(path: str):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except OSError as exc:
        raise PlanError(f"{path}: cannot read it: {exc.strerror}") from None
    except json.JSONDecodeError as exc:
        raise PlanError(f"{path} is not JSON: {exc}") from None


def _check_version(path: str, data: dict) -> None:
    if data.get("version", 1) != 1:
        raise PlanError(f"{path}: version {data.get('version')!r} is not supported (only 1)")


def _check_topic(path: str, entry, topic) -> None:
    if not isinstance(topic, str):
        raise PlanError(f'{path}: {json.dumps(entry)}: "topic" must be a topic name')
    problem = topic_name_problem(topic)
    if problem:
        raise PlanError(f"{path}: topic {topic!r}: {problem}")
