"""Requests that go to a group's coordinator: found with FindCoordinator, followed when
it moves.

Kafka's clients send a group's requests to the broker that leads the group's partition of
`__consumer_offsets`; this module finds that broker, caches it per group and sends
requests there. The coordinator errors are retried until the timeout, as Kafka's admin
client does: COORDINATOR_LOAD_IN_PROGRESS (the coordinator is reading the group back)
at the same broker, NOT_COORDINATOR and COORDINATOR_NOT_AVAILABLE (leadership moved, or
the offsets topic is being created) and a lost connection with a fresh FindCoordinator.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

from broker.client.cluster import ClusterMetadata
from broker.client.connection import UNREACHABLE, BrokerConnection
from broker.cluster import Node
from broker.protocol.apis import FIND_COORDINATOR
from broker.protocol.errors import (
    ErrorCode,
    KafkaError,
    as_error_code,
    error_for,
)

GROUP_KEY_TYPE = 0
TRANSACTION_KEY_TYPE = 1  # a transactional id's coordinator (docs/contracts/transactions.md)
COORDINATOR_ERRORS = frozenset(
    {
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.NOT_COORDINATOR,
    }
)
_BACKOFF_START_S = 0.05
_BACKOFF_MAX_S = 1.0


def coordinator_error(codes: Iterable[int]) -> ErrorCode:
    """The first coordinator error among an answer's codes, NONE if there is none."""
    for code in codes:
        if code in COORDINATOR_ERRORS:
            return as_error_code(code)
    return ErrorCode.NONE


def find_coordinator(conn: BrokerConnection, group_id: str, key_type: int = GROUP_KEY_TYPE) -> Node:
    """One FindCoordinator for a group (or, key type 1, a transactional id) on `conn` (v4+
    asks a list of keys, KIP-699: one here); raises the answer's error. The group
    consumer's heartbeat thread calls it on a connection of its own."""
    version = conn.version_for(FIND_COORDINATOR)
    body = {"key": group_id, "key_type": key_type, "coordinator_keys": [group_id]}
    response = conn.request(FIND_COORDINATOR, body, version)
    answer = response["coordinators"][0] if version >= 4 else response
    if answer["error_code"] != ErrorCode.NONE:
        message = answer.get("error_message") or f"finding the coordinator of {group_id!r}"
        raise error_for(answer["error_code"], message)
    return Node(answer["node_id"], answer["host"], answer["port"])


class GroupCoordinators:
    """The coordinator of each group (or, with TRANSACTION_KEY_TYPE, of each transactional
    id), looked up once and again when it moves."""

    def __init__(
        self, cluster: ClusterMetadata, timeout_s: float, key_type: int = GROUP_KEY_TYPE
    ) -> None:
        self.cluster = cluster
        self.timeout_s = timeout_s
        self.key_type = key_type
        self._nodes: dict[str, int] = {}

    def request(
        self,
        group_id: str,
        api_key: int,
        body: dict | Callable[[int], dict],
        codes: Callable[[dict], Iterable[int]],
    ) -> dict:
        """Send a request to `group_id`'s coordinator and return its answer.

        `body` is the request (or a function of the version the connection will use, for
        requests whose shape changes with it); `codes` gives the error codes of an answer,
        in which a coordinator error means "ask again". Raises the last error when the
        timeout passes before an answer without one; FindCoordinator's own errors other
        than COORDINATOR_NOT_AVAILABLE (INVALID_GROUP_ID, ...) are raised at once.
        """
        deadline = time.monotonic() + self.timeout_s
        backoff = _BACKOFF_START_S
        while True:
            try:
                node = self.node(group_id)
                conn = self.cluster.connection(node)
                request = body(conn.version_for(api_key)) if callable(body) else body
                response = conn.request(api_key, request)
            except UNREACHABLE as exc:
                self._forget(group_id, drop_connection=True)
                failure: KafkaError = exc
            except KafkaError as exc:
                if exc.code not in COORDINATOR_ERRORS:
                    raise
                self._forget(group_id)
                failure = exc
            else:
                error = coordinator_error(codes(response))
                if error == ErrorCode.NONE:
                    return response
                if error != ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
                    self._forget(group_id)
                failure = error_for(error, f"group {group_id!r}")
            if time.monotonic() + backoff > deadline:
                raise failure
            time.sleep(backoff)
            backoff = min(backoff * 2, _BACKOFF_MAX_S)

    def node(self, group_id: str) -> int:
        """The node id of the group's coordinator (FindCoordinator unless cached)."""
        node = self._nodes.get(group_id)
        if node is None:
            found = self.find(group_id)
            node = self._nodes[group_id] = found.node_id
        return node

    def info(self, group_id: str) -> Node:
        """The coordinator's node id, host and port."""
        return self.cluster.brokers[self.node(group_id)]

    def find(self, group_id: str) -> Node:
        """One FindCoordinator (any broker can answer); raises its error if it has one.

        A coordinator the cached metadata does not list yet (a broker just started)
        refreshes it, so that `cluster.connection()` can reach it.
        """
        try:
            found = find_coordinator(self.cluster.any_connection(), group_id, self.key_type)
        except UNREACHABLE:
            self.cluster.refresh([])
            raise
        if found.node_id not in self.cluster.brokers:
            self.cluster.refresh([])
            if found.node_id not in self.cluster.brokers:
                raise error_for(
                    ErrorCode.COORDINATOR_NOT_AVAILABLE,
                    f"coordinator {found.node_id} of {group_id!r} is not in the metadata",
                )
        return found

    def forget(self, group_id: str) -> None:
        """Look the coordinator up again before the next request (an answer said it moved)."""
        self._forget(group_id)

    def _forget(self, group_id: str, drop_connection: bool = False) -> None:
        node = self._nodes.pop(group_id, None)
        if drop_connection and node is not None:
            self.cluster.drop_connection(node)
