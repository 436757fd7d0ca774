"""Topic administration: create, delete, list and describe topics.

create_topics and delete_topics return the outcome of every topic as an ErrorCode
(NONE on success) so a caller can treat TOPIC_ALREADY_EXISTS as fine; with
`raise_errors=True` any failure raises TopicErrors, whose `.errors` maps each failed
topic to (ErrorCode, the broker's message). The messages are also kept, for the last
call, in `AdminClient.last_errors`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import NamedTuple

from broker.client.cluster import ClusterMetadata
from broker.protocol.apis import CREATE_TOPICS, DELETE_TOPICS
from broker.protocol.errors import (
    ErrorCode,
    NetworkError,
    RequestTimedOutError,
    TopicErrors,
    UnknownTopicOrPartitionError,
    as_error_code,
    error_for,
)

_BACKOFF_S = 0.1


@dataclass
class NewTopic:
    name: str
    num_partitions: int
    # -1: the broker's default.replication.factor (what Kafka's admin clients leave empty).
    replication_factor: int = -1
    configs: dict[str, str] = field(default_factory=dict)


class PartitionInfo(NamedTuple):
    partition: int
    leader: int
    replicas: list[int]
    isr: list[int]


class TopicDescription(NamedTuple):
    name: str
    partitions: list[PartitionInfo]


class AdminClient:
    def __init__(
        self,
        bootstrap_servers: str | list[str],
        client_id: str = "kafka-hourly",
        request_timeout_ms: int = 30000,
    ):
        self.timeout_s = request_timeout_ms / 1000
        self.cluster = ClusterMetadata(bootstrap_servers, client_id, self.timeout_s)
        self.last_errors: dict[str, tuple[ErrorCode, str | None]] = {}

    def close(self) -> None:
        self.cluster.close()

    def __enter__(self) -> AdminClient:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def create_topics(
        self,
        topics: list[NewTopic],
        timeout_ms: int = 30000,
        validate_only: bool = False,
        raise_errors: bool = False,
    ) -> dict[str, ErrorCode]:
        """Create topics; returns name -> ErrorCode (see the module docstring).

        Waits (up to timeout_ms) until created topics show leaders in the metadata, so
        they can be produced to right away.
        """
        body = {
            "topics": [
                {
                    "name": t.name,
                    "num_partitions": t.num_partitions,
                    "replication_factor": t.replication_factor,
                    "assignments": [],
                    "configs": [{"name": k, "value": v} for k, v in t.configs.items()],
                }
                for t in topics
            ],
            "timeout_ms": timeout_ms,
            "validate_only": validate_only,
        }
        response = self._controller_request(CREATE_TOPICS, body)
        outcome = {
            t["name"]: (as_error_code(t["error_code"]), t["error_message"])
            for t in response["topics"]
        }
        created = [n for n, (code, _) in outcome.items() if code == ErrorCode.NONE]
        if created and not validate_only:
            self.cluster.wait_for_leaders(created, timeout_ms / 1000)
        return self._report("create topics", outcome, raise_errors)

    def delete_topics(
        self, names: list[str], timeout_ms: int = 30000, raise_errors: bool = False
    ) -> dict[str, ErrorCode]:
        """Delete topics; returns name -> ErrorCode (see the module docstring)."""
        body = {"topic_names": list(names), "timeout_ms": timeout_ms}
        response = self._controller_request(DELETE_TOPICS, body)
        outcome = {r["name"]: (as_error_code(r["error_code"]), None) for r in response["responses"]}
        for name in names:
            self.cluster.topics.pop(name, None)
        return self._report("delete topics", outcome, raise_errors)

    def list_topics(self) -> list[str]:
        """Names of every topic in the cluster, sorted."""
        self.cluster.refresh()
        return sorted(self.cluster.topics)

    def describe_topics(self, names: list[str] | None = None) -> dict[str, TopicDescription]:
        """Partitions, leaders, replicas and ISR of `names` (None: every topic).

        Raises UnknownTopicOrPartitionError naming the topics that do not exist.
        """
        errors = self.cluster.refresh(None if names is None else list(names))
        missing = [
            n for n in (names or []) if n not in self.cluster.topics or errors.get(n, 0) != 0
        ]
        if missing:
            raise UnknownTopicOrPartitionError(f"no such topic(s): {', '.join(missing)}")
        wanted = sorted(self.cluster.topics) if names is None else names
        out = {}
        for name in wanted:
            meta = self.cluster.topics[name]
            out[name] = TopicDescription(
                name,
                [
                    PartitionInfo(p.partition, p.leader, p.replicas, p.isr)
                    for p in sorted(meta.partitions.values())
                ],
            )
        return out

    # --- helpers ------------------------------------------------------------------

    def _controller_request(self, api_key: int, body: dict) -> dict:
        """Send to the controller, following it if it moves or restarts, until the timeout."""
        deadline = time.monotonic() + self.timeout_s
        while True:
            node = self.cluster.controller_id
            try:
                conn = (
                    self.cluster.connection(node)
                    if node in self.cluster.brokers
                    else self.cluster.any_connection()
                )
                response = conn.request(api_key, body)
            except (NetworkError, RequestTimedOutError) as exc:
                self.cluster.drop_connection(node)
                if time.monotonic() + _BACKOFF_S > deadline:
                    raise NetworkError(f"controller unreachable: {exc}") from exc
            else:
                codes = [
                    t["error_code"] for t in response.get("topics", response.get("responses", []))
                ]
                if ErrorCode.NOT_CONTROLLER not in codes:
                    return response
                if time.monotonic() + _BACKOFF_S > deadline:
                    raise error_for(ErrorCode.NOT_CONTROLLER, "no controller answered in time")
            time.sleep(_BACKOFF_S)
            try:
                self.cluster.refresh([])
            except NetworkError:
                pass

    def _report(
        self,
        operation: str,
        outcome: dict[str, tuple[ErrorCode, str | None]],
        raise_errors: bool,
    ) -> dict[str, ErrorCode]:
        self.last_errors = {n: e for n, e in outcome.items() if e[0] != ErrorCode.NONE}
        if raise_errors and self.last_errors:
            raise TopicErrors(operation, self.last_errors)
        return {name: code for name, (code, _) in outcome.items()}
