"""Requests that wait: Kafka's DelayedOperation and its purgatory, without I/O.

A handler that cannot answer yet (a long-poll fetch short of `min_bytes`, an acks=all
produce waiting for the in-sync replicas, a group join waiting for the other members)
builds a `DelayedOperation` and gives it to a `Purgatory` with the keys whose events
may let it finish (a partition, a group). Whoever causes such an event calls
`check_and_complete(key)` (the operation hears which key through `on_key`, so it can
look at that key alone); the broker's timer calls `expire_due(now)` for operations whose
deadline passed. Each operation completes exactly once, with the response body, and
then tells the callbacks registered on it (the connection waiting to send the answer).

Nothing here sleeps or touches sockets: the asyncio side only decides when to call
`expire_due` (`next_deadline()` says when) and waits for the completion callback, so
every path is testable with a hand-driven clock.

An operation completed through one key (or by its owner, or at its deadline) stays in the
watcher lists of its other keys until an event on such a key drops it, or until enough
operations completed since the last purge (`purge_interval`, as Kafka's
`*.purgatory.purge.interval.requests`) that one pass over every list pays for itself:
completing is O(1), never a rebuild of each of its keys' lists.
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
        # The purgatory watching this operation, told of its completion (counts).
        self._watched_by: Purgatory | None = None

    def on_key(self, key: Hashable) -> None:
        """An event on `key` is about to be checked: an operation watching many keys can
        note which one changed and look only at it in `try_complete`."""

    def try_complete(self, now_ms: int) -> bool:
        raise NotImplementedError

    def on_expiration(self, now_ms: int) -> Any:
        raise NotImplementedError

    def complete(self, result: Any) -> bool:
        """Finish with `result`; False if the operation had already finished."""
        if self.completed:
            return False
        self.completed, self.result = True, result
        if self._watched_by is not None:
            self._watched_by._completed()
            self._watched_by = None
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

    def __init__(self, name: str, purge_interval: int = 1000) -> None:
        self.name = name
        self.purge_interval = purge_interval
        self._waiting = 0  # watched, not completed
        self._completed_since_purge = 0
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
        operation._watched_by = self
        self._waiting += 1
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
            operation.on_key(key)
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
        return expired

    def next_deadline(self) -> int | None:
        """The earliest deadline of a waiting operation (completed ones are dropped)."""
        while self._deadlines and self._deadlines[0][2].completed:
            heapq.heappop(self._deadlines)
        return self._deadlines[0][0] if self._deadlines else None

    def _completed(self) -> None:
        self._waiting -= 1
        self._completed_since_purge += 1
        if self._completed_since_purge >= self.purge_interval:
            self.purge()

    def purge(self) -> None:
        """Drop completed operations from every watcher list and the deadline heap."""
        self._completed_since_purge = 0
        for key in list(self._watchers):
            live = [op for op in self._watchers[key] if not op.completed]
            if live:
                self._watchers[key] = live
            else:
                del self._watchers[key]
        self._deadlines = [entry for entry in self._deadlines if not entry[2].completed]
        heapq.heapify(self._deadlines)

    def __len__(self) -> int:
        """Operations still waiting (what a purgatory-size metric reports): a count kept
        as operations are watched and complete."""
        return self._waiting

    def watched_keys(self) -> int:
        """Keys some waiting operation watches (purges first: a diagnostic, O(watchers))."""
        self.purge()
        return len(self._watchers)
