"""What every API handler is: its declaration, two functions, and what they may return.

A handler module declares `HANDLER = ApiHandler(<its Api from broker.protocol.apis>,
handle, error_response)`; `broker.server.handlers` finds every such module, so adding an
API touches its declaration and its handler, nothing else. ApiVersions advertises exactly
the declared range of every API that has a handler.

`handle(ctx: BrokerContext, request: RequestContext, body) -> Answer` gets the broker's
state, the request's context (header, session, arrival time) and the decoded body.
Handlers are synchronous and never do network I/O; they do change state (append to logs,
create topics). An `Answer` is one of:
- the response body (a dict keyed like the API's response declaration);
- `NO_RESPONSE`: the client expects none (Produce with acks=0);
- `Delayed(operation)`: the answer comes when the operation, already handed to a
  purgatory by the handler, completes (see broker/util/purgatory.py); or, for work that
  needs I/O (ZooKeeper, other brokers), `run_async(ctx, coroutine)`: the answer is
  what the coroutine returns.

`error_response(body, code)` answers a decodable request with `code` everywhere (for a
version below the accepted range, or a failure before any work was done).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

from broker.protocol.apis import Api
from broker.protocol.errors import ErrorCode
from broker.server.context import BrokerContext
from broker.server.request import RequestContext
from broker.util.purgatory import DelayedOperation, OperationFailed


class Delayed(NamedTuple):
    operation: DelayedOperation


class TaskOperation(DelayedOperation):
    """An answer produced by a coroutine (ZooKeeper writes, waiting for the controller's
    decision to reach the metadata cache): completes when its task does; in no purgatory."""

    def __init__(self, task) -> None:
        super().__init__(deadline_ms=2**63 - 1, keys=())
        self.task = task  # a strong reference: the loop itself holds only a weak one
        task.add_done_callback(self._done)

    def _done(self, task) -> None:
        if task.cancelled():
            self.complete(OperationFailed(RuntimeError("cancelled")))
        elif task.exception() is not None:
            self.complete(OperationFailed(task.exception()))
        else:
            self.complete(task.result())

    def try_complete(self, now_ms: int) -> bool:
        return self.completed

    def on_expiration(self, now_ms: int):
        raise RuntimeError("a task operation has no deadline")


def run_async(ctx: BrokerContext, coro) -> Delayed:
    """Answer with what `coro` returns (a response body), once it has run on the loop."""
    return Delayed(TaskOperation(ctx.spawn(coro)))


class Then(DelayedOperation):
    """The response built by `build` from another operation's result, once that one
    completes (a group coordinator's decision, a replicated write); in no purgatory."""

    def __init__(self, operation: DelayedOperation, build: Callable[[Any], dict]) -> None:
        super().__init__(deadline_ms=2**63 - 1, keys=())
        self.build = build
        operation.add_done_callback(self._done)

    def _done(self, result) -> None:
        if isinstance(result, OperationFailed):
            self.complete(result)
            return
        try:
            self.complete(self.build(result))
        except Exception as exc:
            self.complete(OperationFailed(exc))

    def try_complete(self, now_ms: int) -> bool:
        return self.completed

    def on_expiration(self, now_ms: int):
        raise RuntimeError("answered when the operation it follows completes")


def respond(result: Any, build: Callable[[Any], dict]) -> dict | Delayed:
    """`build(result)` now, or once `result` (a DelayedOperation) completes."""
    if isinstance(result, DelayedOperation):
        if result.completed and not isinstance(result.result, OperationFailed):
            return build(result.result)
        return Delayed(Then(result, build))
    return build(result)


class _NoResponse:
    def __repr__(self) -> str:
        return "NO_RESPONSE"


NO_RESPONSE = _NoResponse()

# What a handler returns (the module's docstring says when each).
Answer = dict | Delayed | _NoResponse
Handle = Callable[[BrokerContext, RequestContext, dict], Answer]
ErrorResponse = Callable[[dict, ErrorCode], dict]


@dataclass(frozen=True)
class ApiHandler:
    api: Api
    handle: Handle
    error_response: ErrorResponse
    # Versions below this are advertised (clients probe for overlap, see
    # docs/contracts) but answered with UNSUPPORTED_VERSION; None accepts the whole range.
    accepted_from: int | None = None

    @property
    def key(self) -> int:
        return self.api.key

    @property
    def advertised(self) -> tuple[int, int]:
        return self.api.min_version, self.api.max_version

    def declares(self, version: int) -> bool:
        """Inside the advertised range: the request can be decoded and answered."""
        return self.api.supports(version)

    def accepts(self, version: int) -> bool:
        return self.declares(version) and version >= (self.accepted_from or 0)


def leader_error(partition, current_leader_epoch: int = -1, any_replica: bool = False) -> ErrorCode:
    """Whether this broker may answer a read of `partition` (a Partition or None), in
    Kafka's order (ReplicaManager's getPartitionOrError, then the leader and epoch checks):
    not hosted, its log dir offline (KAFKA_STORAGE_ERROR: docs/contracts/log.md, "Log
    directory failure"), not the leader (unless `any_replica`, a debugging tool reading a
    follower), then `current_leader_epoch_error`."""
    if partition is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    if partition.log.offline:
        return ErrorCode.KAFKA_STORAGE_ERROR
    if not partition.is_leader and not any_replica:
        return ErrorCode.NOT_LEADER_OR_FOLLOWER
    return current_leader_epoch_error(current_leader_epoch, partition.leader_epoch)


def current_leader_epoch_error(current_leader_epoch: int, leader_epoch: int) -> ErrorCode:
    """The check of a request's `current_leader_epoch` (KIP-320: Fetch, ListOffsets,
    OffsetForLeaderEpoch) against the partition's `leader_epoch`: -1 is not checked; an
    older epoch is FENCED_LEADER_EPOCH (the client's metadata is stale), a newer one
    UNKNOWN_LEADER_EPOCH (this broker has not heard of it yet). Both make clients refresh
    their metadata and retry."""
    if current_leader_epoch < 0 or current_leader_epoch == leader_epoch:
        return ErrorCode.NONE
    if current_leader_epoch < leader_epoch:
        return ErrorCode.FENCED_LEADER_EPOCH
    return ErrorCode.UNKNOWN_LEADER_EPOCH
