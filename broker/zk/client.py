"""ZooKeeper for an asyncio broker: kazoo underneath, every result and event on the loop.

kazoo runs its own threads; nothing of ours may run there. Calls go through kazoo's
asynchronous API and resolve asyncio futures via `call_soon_threadsafe`; watch callbacks
and session-state changes are handed to the event loop the same way. So broker state is
only ever touched from the event loop thread (docs/contracts/cluster.md).
"""

from __future__ import annotations

import asyncio
import copy
import logging
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import (
    BadVersionError,
    ConnectionLoss,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    RolledBackError,
)
from kazoo.protocol.states import WatchedEvent, ZnodeStat

log = logging.getLogger(__name__)

__all__ = [
    "BadVersionError",
    "ConnectionLoss",
    "NoNodeError",
    "NodeExistsError",
    "NotEmptyError",
    "SessionState",
    "WatchedEvent",
    "ZkClient",
    "ZkCounts",
    "ZnodeStat",
]

# A multi is one request, and ZooKeeper refuses a request larger than its jute.maxbuffer
# (1 MiB by default): `commit_each` packs operations into multis well below it, and
# below an operation count that keeps a retried multi (after one operation failed) cheap.
MULTI_MAX_BYTES = 512 * 1024
MULTI_MAX_OPERATIONS = 1000
_OPERATION_OVERHEAD = 32  # a multi header, the op's type, version and lengths, its ACL


@dataclass
class ZkCounts:
    """Requests sent to ZooKeeper and the operations they carried (a multi of N writes is
    one request of N operations): what a caller's ZooKeeper work costs, counted rather
    than timed. An `ensure_paths` path counts as one request (kazoo's exists; a missing
    path costs a create more)."""

    requests: int = 0
    operations: int = 0

    def add(self, operations: int = 1) -> None:
        self.requests += 1
        self.operations += operations

    def snapshot(self) -> tuple[int, int]:
        return self.requests, self.operations


class SessionState:
    """kazoo's connection states: CONNECTED; SUSPENDED (connection lost, the session may
    still be alive: ephemeral nodes stay until it expires); LOST (the session expired or
    the client stopped: ephemeral nodes and watches are gone, re-register)."""

    CONNECTED = KazooState.CONNECTED
    SUSPENDED = KazooState.SUSPENDED
    LOST = KazooState.LOST


Watch = Callable[[WatchedEvent], None]


class ZkClient:
    def __init__(
        self,
        connect: str,
        session_timeout_ms: int = 18000,
        connection_timeout_ms: int | None = None,
    ) -> None:
        self.connect = connect
        self._loop: asyncio.AbstractEventLoop | None = None
        self._kazoo = KazooClient(
            hosts=connect,
            timeout=session_timeout_ms / 1000,
            connection_retry={"max_tries": -1, "delay": 0.2, "max_delay": 2},
            command_retry=None,
        )
        self._session_timeout_s = session_timeout_ms / 1000
        self._connection_timeout_s = (connection_timeout_ms or session_timeout_ms) / 1000
        self._state_listeners: list[Callable[[str], None]] = []
        # when_connected's callbacks; the lock orders them against kazoo's thread, which
        # sets `connected` before it tells the listener (so none is missed).
        self._on_connected: list[Callable[[], None]] = []
        self._on_connected_lock = threading.Lock()
        self._kazoo.add_listener(self._on_state)
        self.counts = ZkCounts()
        self._tallies: tuple[ZkCounts, ...] = (self.counts,)

    def counted(self, counts: ZkCounts) -> ZkClient:
        """This client's session, with the requests made through the returned one tallied
        in `counts` as well (so that one user of a shared session, e.g. the controller,
        can tell its requests from the others'). Lifecycle calls belong to the original."""
        view = copy.copy(self)
        view.counts = counts
        view._tallies = (*self._tallies, counts)
        return view

    # -- lifecycle ----------------------------------------------------------------------
    async def start(self) -> None:
        """Connect (creating the connect string's chroot path if missing, as Kafka does);
        raises TimeoutError when no server answers in time."""
        self._loop = asyncio.get_running_loop()
        hosts, slash, chroot = self.connect.partition("/")
        if slash and chroot:
            root = KazooClient(hosts=hosts, timeout=self._session_timeout_s)
            await self._loop.run_in_executor(None, self._ensure_chroot, root, "/" + chroot)
        await self._loop.run_in_executor(None, self._start_blocking, self._kazoo)

    def _start_blocking(self, kazoo: KazooClient) -> None:  # an executor thread
        event = kazoo.start_async()
        if not event.wait(self._connection_timeout_s) or not kazoo.connected:
            kazoo.stop()
            raise TimeoutError(
                f"could not connect to ZooKeeper at {self.connect} within "
                f"{self._connection_timeout_s:.0f}s"
            )

    def _ensure_chroot(self, root: KazooClient, path: str) -> None:  # an executor thread
        try:
            self._start_blocking(root)
            root.ensure_path(path)
        finally:
            root.stop()
            root.close()

    async def close(self) -> None:
        """End the session (its ephemeral nodes go at once) and the client's threads."""
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, self._stop)

    def _stop(self) -> None:
        try:
            self._kazoo.stop()
        finally:
            self._kazoo.close()

    @property
    def connected(self) -> bool:
        return self._kazoo.connected

    @property
    def session_id(self) -> int | None:
        """The current session's id (a new one after an expiry)."""
        session = self._kazoo.client_id
        return session[0] if session else None

    def add_state_listener(self, listener: Callable[[str], None]) -> None:
        """`listener(state)` on the event loop for every SessionState change."""
        self._state_listeners.append(listener)

    def when_connected(self, callback: Callable[[], None]) -> None:
        """`callback()` once on the event loop when the client is connected: soon if it is
        now, else at the next CONNECTED. For work a lost connection interrupted (a
        request failed with ConnectionLoss: what it read is unknown and a watch it was
        setting is not set; the session, ephemeral nodes and other watches may live on)."""
        loop = self._loop or asyncio.get_running_loop()
        with self._on_connected_lock:
            if not self._kazoo.connected:
                self._on_connected.append(callback)
                return
        loop.call_soon(callback)

    def _on_state(self, state: str) -> None:  # kazoo's thread
        if self._loop is None or self._loop.is_closed():
            return
        waiting: list[Callable[[], None]] = []
        if state == SessionState.CONNECTED:
            with self._on_connected_lock:
                waiting = self._on_connected[:]
                self._on_connected.clear()
        for listener in self._state_listeners:
            self._loop.call_soon_threadsafe(listener, state)
        for callback in waiting:
            self._loop.call_soon_threadsafe(callback)

    # -- reads ----------------------------------------------------------------------------
    async def get(self, path: str, watch: Watch | None = None) -> tuple[bytes, ZnodeStat] | None:
        """(data, stat), or None when the node does not exist (a watch set then fires on
        its creation only if set through `exists`)."""
        try:
            return await self._call(self._kazoo.get_async(path, self._on_loop(watch)))
        except NoNodeError:
            return None

    async def get_many(self, paths: Iterable[str]) -> list[tuple[bytes, ZnodeStat] | None]:
        """`get` of each path, the requests pipelined on the one connection (one round
        trip, not one per path: ZooKeeper's multi carries no reads before 3.6)."""
        return list(await asyncio.gather(*(self.get(path) for path in paths)))

    async def get_children(self, path: str, watch: Watch | None = None) -> list[str] | None:
        try:
            return await self._call(self._kazoo.get_children_async(path, self._on_loop(watch)))
        except NoNodeError:
            return None

    async def exists(self, path: str, watch: Watch | None = None) -> ZnodeStat | None:
        return await self._call(self._kazoo.exists_async(path, self._on_loop(watch)))

    # -- writes ---------------------------------------------------------------------------
    async def create(
        self,
        path: str,
        data: bytes = b"",
        *,
        ephemeral: bool = False,
        sequence: bool = False,
        makepath: bool = False,
    ) -> str:
        """The created path (with its sequence number). Raises NodeExistsError."""
        return await self._call(
            self._kazoo.create_async(
                path, data, ephemeral=ephemeral, sequence=sequence, makepath=makepath
            )
        )

    async def set(self, path: str, data: bytes, version: int = -1) -> ZnodeStat:
        """Raises BadVersionError when `version` is not the node's (a conditional update
        lost to another writer), NoNodeError when it is gone."""
        return await self._call(self._kazoo.set_async(path, data, version))

    async def delete(self, path: str, version: int = -1, recursive: bool = False) -> bool:
        """True when deleted, False when it was already gone."""
        try:
            if recursive:
                loop = asyncio.get_running_loop()
                await loop.run_in_executor(None, self._kazoo.delete, path, version, True)
            else:
                await self._call(self._kazoo.delete_async(path, version))
            return True
        except NoNodeError:
            return False

    async def ensure_paths(self, paths: Iterable[str]) -> None:
        for path in paths:
            await self._call(self._kazoo.ensure_path_async(path))

    async def commit(self, operations: Iterable[tuple[str, Any]]) -> list[Any]:
        """Several writes applied atomically (ZooKeeper's multi), e.g. a controller's
        ("check", path, version) fencing its ("set", path, data, version) writes.
        Raises the failing operation's error, with its index in `failed_operation`;
        nothing is applied then. Returns each operation's result (a set's ZnodeStat, a
        create's path, True for a check or a delete)."""
        results = await self._multi(list(operations))
        failed = _failed_operation(results)
        if failed is not None:
            raise results[failed]
        return results

    async def commit_each(
        self, groups: Sequence[list[tuple[str, Any]]], common: Sequence[tuple[str, Any]] = ()
    ) -> list[list[Any] | Exception]:
        """Many independent groups of writes (e.g. one conditional set per partition), each
        applied atomically on its own, in a few multis rather than a request per group:
        the groups are packed into multis below ZooKeeper's request size (`common`, e.g. a
        fencing check, leads each multi) and the multis are sent together, pipelined on
        the one connection. Returns per group its operations' results, or the error of
        its operation that failed (e.g. BadVersionError: someone else wrote first).

        A multi is all or nothing and ZooKeeper reports only its first failing
        operation: the groups before it are sent again in one multi, those after it in two
        (so k failing groups among n cost about k log(n/k) requests, in log n rounds).
        A failing `common` operation raises its error (`failed_operation` its index)."""
        results: list[list[Any] | Exception | None] = [None] * len(groups)
        lead = list(common)

        async def send(indices: list[int]) -> None:
            operations = lead + [op for i in indices for op in groups[i]]
            answers = await self._multi(operations)
            failed = _failed_operation(answers)
            if failed is None:
                at = len(lead)
                for i in indices:
                    results[i] = answers[at : at + len(groups[i])]
                    at += len(groups[i])
                return
            if failed < len(lead):
                raise answers[failed]
            at, position = len(lead), 0
            while at + len(groups[indices[position]]) <= failed:
                at += len(groups[indices[position]])
                position += 1
            results[indices[position]] = answers[failed]
            before, after = indices[:position], indices[position + 1 :]
            half = len(after) // 2
            retry = [part for part in (before, after[:half], after[half:]) if part]
            await asyncio.gather(*(send(part) for part in retry))

        await asyncio.gather(*(send(chunk) for chunk in _pack(groups, lead)))
        return results

    async def _multi(self, operations: list[tuple[str, Any]]) -> list[Any]:
        """One multi; every operation's result or error (a failed multi answers the
        operation that failed with its error, those before it with RolledBackError, those
        after with RuntimeInconsistency)."""
        transaction = self._kazoo.transaction()
        for op, *args in operations:
            {
                "check": transaction.check,
                "create": transaction.create,
                "set": transaction.set_data,
                "delete": transaction.delete,
            }[op](*args)
        return await self._call(transaction.commit_async(), len(operations))

    # -- plumbing -------------------------------------------------------------------------
    def _call(self, async_result, operations: int = 1) -> asyncio.Future:
        for tally in self._tallies:
            tally.add(operations)
        loop = self._loop or asyncio.get_running_loop()
        future = loop.create_future()

        def done(result) -> None:  # kazoo's thread
            try:
                value, error = result.get_nowait(), None
            except Exception as exc:  # delivered to the awaiting coroutine
                value, error = None, exc
            if not loop.is_closed():
                loop.call_soon_threadsafe(_resolve, future, value, error)

        async_result.rawlink(done)
        return future

    def _on_loop(self, watch: Watch | None) -> Watch | None:
        if watch is None:
            return None
        loop = self._loop or asyncio.get_running_loop()

        def deliver(event: WatchedEvent) -> None:  # kazoo's thread
            if not loop.is_closed():
                loop.call_soon_threadsafe(watch, event)

        return deliver


def _failed_operation(results: list[Any]) -> int | None:
    """The index of a failed multi's failing operation (its error marked with it), or
    None when the multi succeeded."""
    for index, result in enumerate(results):
        if isinstance(result, Exception) and not isinstance(result, RolledBackError):
            result.failed_operation = index  # which one: e.g. a fencing check
            return index
    if any(isinstance(result, Exception) for result in results):
        raise RuntimeError(f"a multi failed without a failing operation: {results}")
    return None


def _pack(groups: Sequence[list[tuple]], lead: list[tuple]) -> list[list[int]]:
    """The groups' indices, in order, in chunks that each fit one multi with `lead`."""
    chunks: list[list[int]] = []
    chunk: list[int] = []
    size = count = 0
    fixed = sum(_operation_bytes(op) for op in lead), len(lead)
    for index, group in enumerate(groups):
        group_bytes = sum(_operation_bytes(op) for op in group)
        if chunk and (
            fixed[0] + size + group_bytes > MULTI_MAX_BYTES
            or fixed[1] + count + len(group) > MULTI_MAX_OPERATIONS
        ):
            chunks.append(chunk)
            chunk, size, count = [], 0, 0
        chunk.append(index)
        size += group_bytes
        count += len(group)
    if chunk:
        chunks.append(chunk)
    return chunks


def _operation_bytes(operation: tuple) -> int:
    return _OPERATION_OVERHEAD + sum(
        len(arg) for arg in operation[1:] if isinstance(arg, (str, bytes))
    )


def _resolve(future: asyncio.Future, value: Any, error: BaseException | None) -> None:
    if future.done():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(value)
