"""Requests that wait: Kafka's DelayedOperation and its purgatory, without I/O.

A handler that cannot answer yet (a long-poll fetch short of `min_bytes`, an acks=all
produce waiting for the in-sync replicas, a group join waiting for the other members)
builds a `DelayedOperation` and gives it to a `Purgatory` with the keys whose events
may let it finish (a partition, a group). Whoever causes such an event calls
`check_and_complete(key)`; the broker's timer calls `expire_due(now)` for operations whose
deadline passed. Each operation completes exactly once, with the response body, and
then tells the callbacks registered on it (the connection waiting to send the answer).

Nothing here sleeps or touches sockets: the asyncio side only decides when to call
`expire_due` (`next_deadline()` says when) and waits for the completion callback, so
every path is testable with a hand-driven clock.
"""

from __future__ import annotations

import heapq
import itertools
import logging
from collections import defaultdict
from collections.abc import Callable, Hashable, Iterable
from typing import Any

log = logging.getLogger(__name__)


class OperationFailed:
    """The result of an operation whose completion check raised: whoever waits for it
    closes the connection instead of hanging until a deadline that will never help."""

    def __init__(self, error: BaseException) -> None:
        self.error = error


class DelayedOperation:
    """A response that waits for an event on one of `keys`, or for `deadline_ms`.

    Subclasses implement `try_complete(now_ms)`, which calls `self.complete(result)`
    and returns True when the operation can finish now, and `on_expiration(now_ms)`,
    which returns the result to answer with when the deadline passes first.
    """

    def __init__(self, deadline_ms: int, keys: Iterable[Hashable]) -> None:
        self.deadline_ms = deadline_ms
        self.keys = tuple(keys)
        self.completed = False
        self.result: Any = None
        self._callbacks: list[Callable[[Any], None]] = []

    def try_complete(self, now_ms: int) -> bool:
        raise NotImplementedError

    def on_expiration(self, now_ms: int) -> Any:
        raise NotImplementedError

    def complete(self, result: Any) -> bool:
        """Finish with `result`; False if the operation had already finished."""
        if self.completed:
            return False
        self.completed, self.result = True, result
        callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback(result)
        return True

    def add_done_callback(self, callback: Callable[[Any], None]) -> None:
        """Call `callback(result)` on completion (at once if already complete)."""
        if self.completed:
            callback(self.result)
        else:
            self._callbacks.append(callback)

    def expire(self, now_ms: int) -> bool:
        if self.completed:
            return False
        try:
            result = self.on_expiration(now_ms)
        except Exception as exc:
            log.exception("delayed operation %r failed at its deadline", self)
            result = OperationFailed(exc)
        return self.complete(result)

    def check(self, now_ms: int) -> bool:
        """`try_complete`, with a failure completing the operation as failed."""
        try:
            return self.try_complete(now_ms)
        except Exception as exc:
            log.exception("delayed operation %r failed", self)
            return self.complete(OperationFailed(exc))


class Purgatory:
    """Operations waiting on keys, completed by events or expired by deadline."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._watchers: dict[Hashable, list[DelayedOperation]] = defaultdict(list)
        self._deadlines: list[tuple[int, int, DelayedOperation]] = []
        self._seq = itertools.count()  # ties in the heap never compare operations
        # Told the new earliest deadline when an operation moves it earlier, so a
        # timer sleeping until a later one can wake sooner.
        self.on_earlier_deadline: Callable[[int], None] = lambda deadline_ms: None

    def try_complete_else_watch(self, operation: DelayedOperation, now_ms: int) -> bool:
        """Complete `operation` now if it can; otherwise watch its keys until an event or
        its deadline. True when it completed at once."""
        if operation.check(now_ms):
            return True
        if operation.deadline_ms <= now_ms:
            operation.expire(now_ms)
            return True
        for key in operation.keys:
            self._watchers[key].append(operation)
        earliest = self.next_deadline()
        heapq.heappush(self._deadlines, (operation.deadline_ms, next(self._seq), operation))
        if earliest is None or operation.deadline_ms < earliest:
            self.on_earlier_deadline(operation.deadline_ms)
        return False

    def check_and_complete(self, key: Hashable, now_ms: int) -> int:
        """Something happened on `key`: try every operation watching it. Returns how many
        completed. Operations completed through another key are dropped here."""
        watching = self._watchers.pop(key, None)
        if not watching:
            return 0
        done, still = 0, []
        for operation in watching:
            if operation.completed:
                continue
            if operation.check(now_ms):
                done += 1
            else:
                still.append(operation)
        if still:
            self._watchers[key].extend(still)
        return done

    def expire_due(self, now_ms: int) -> int:
        """Answer every operation whose deadline is at or before `now_ms`."""
        expired = 0
        while self._deadlines and self._deadlines[0][0] <= now_ms:
            _, _, operation = heapq.heappop(self._deadlines)
            if operation.expire(now_ms):
                expired += 1
            self._unwatch(operation)
        return expired

    def next_deadline(self) -> int | None:
        """The earliest deadline of a waiting operation (completed ones are dropped)."""
        while self._deadlines and self._deadlines[0][2].completed:
            self._unwatch(heapq.heappop(self._deadlines)[2])
        return self._deadlines[0][0] if self._deadlines else None

    def _unwatch(self, operation: DelayedOperation) -> None:
        for key in operation.keys:
            watching = self._watchers.get(key)
            if watching is None:
                continue
            watching[:] = [op for op in watching if op is not operation and not op.completed]
            if not watching:
                del self._watchers[key]

    def __len__(self) -> int:
        """Operations still waiting (what a purgatory-size metric reports)."""
        return sum(1 for _, _, op in self._deadlines if not op.completed)

    def watched_keys(self) -> int:
        return len(self._watchers)
