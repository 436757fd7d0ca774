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
from collections import namedtuple
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import (
    EXCEPTIONS,
    BadArgumentsError,
    BadVersionError,
    ConnectionLoss,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    RolledBackError,
    UnimplementedError,
)
from kazoo.protocol.serialization import (
    GetData,
    MultiHeader,
    int_struct,
    multiheader_struct,
    read_buffer,
    stat_struct,
    write_string,
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
    "UnimplementedError",
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
        # Whether the server answers multiRead (None: not asked yet).
        self._multi_read_known: list[bool | None] = [None]

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
        """`get` of each path, as ZooKeeper's multiRead (3.6 and later): a request per
        `MULTI_MAX_OPERATIONS` paths, sent together, rather than one per path (ten
        thousand gets cost the server ten thousand requests and this process a future,
        a thread hand-off and a decode each). A server without multiRead gets the
        requests pipelined on the one connection (one round trip all the same)."""
        paths = list(paths)
        if not paths:
            return []
        if self._multi_read is False:
            return list(await asyncio.gather(*(self.get(path) for path in paths)))
        chunks = _pack([[("get", path)] for path in paths], [])
        try:
            answers = await asyncio.gather(
                *(self._read_together([paths[i] for i in chunk]) for chunk in chunks)
            )
        except (UnimplementedError, BadArgumentsError):
            if self._multi_read:
                raise
            log.info("ZooKeeper at %s has no multiRead: reads pipelined instead", self.connect)
            self._set_multi_read(False)
            return await self.get_many(paths)
        self._set_multi_read(True)
        return [found for answer in answers for found in answer]

    async def _read_together(self, paths: list[str]) -> list[tuple[bytes, ZnodeStat] | None]:
        chroot = self._kazoo.chroot
        request = _MultiRead(tuple((chroot + path).rstrip("/") or "/" for path in paths))
        async_result = self._kazoo.handler.async_result()
        self._kazoo._call(request, async_result)  # kazoo sends any request type it is given
        answers = await self._call(async_result, len(paths))
        for answer in answers:
            if isinstance(answer, Exception) and not isinstance(answer, NoNodeError):
                raise answer
        return [None if isinstance(answer, Exception) else answer for answer in answers]

    def _set_multi_read(self, supported: bool) -> None:
        # Shared by every counted() view of the session: the server is the same.
        self._multi_read_known[0] = supported

    @property
    def _multi_read(self) -> bool | None:
        return self._multi_read_known[0]

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
        operation. So when one fails, the znodes the rest of its groups write are read
        (one multiRead) and the groups whose writes the read shows failing (a version
        moved on, a znode gone or already there) are answered with that error unsent;
        the others go again in one multi. Groups losing to other writers cost about
        three requests per multi, not one or more per group; a loss that lands between
        the read and the resend costs one more round.
        A failing `common` operation raises its error (`failed_operation` its index)."""
        results: list[list[Any] | Exception | None] = [None] * len(groups)
        lead = list(common)

        async def send(indices: list[int]) -> None:
            while indices:
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
                rest = indices[:position] + indices[position + 1 :]
                if not rest:
                    return
                stats = await self._stats([op[1] for i in rest for op in groups[i]])
                indices = []
                for i in rest:
                    error = _predicted_failure(groups[i], stats)
                    if error is None:
                        indices.append(i)
                    else:
                        results[i] = error

        await asyncio.gather(*(send(chunk) for chunk in _pack(groups, lead)))
        return results

    async def _stats(self, paths: list[str]) -> dict[str, ZnodeStat | None]:
        """Each path's stat now (None: no such znode)."""
        unique = list(dict.fromkeys(paths))
        found = await self.get_many(unique)
        return {path: None if f is None else f[1] for path, f in zip(unique, found, strict=True)}

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


def _predicted_failure(group: list[tuple], stats: dict[str, ZnodeStat | None]) -> Exception | None:
    """The error the group's writes would fail with on znodes as `stats` shows them (each
    write applied to that view in turn), None when they would all succeed. Writes applied
    by groups before it in the same multi are not in the view: the multi that follows
    tells, at worst one more round."""
    versions: dict[str, int | None] = {}  # the group's own writes so far
    for op, path, *args in group:
        if path in versions:
            current = versions[path]
        else:
            stat = stats.get(path)
            current = None if stat is None else stat.version
        if op == "create":
            if current is not None:
                return NodeExistsError()
            versions[path] = 0
            continue
        if current is None:
            return NoNodeError()
        expected = args[-1] if args else -1
        if expected not in (-1, current):
            return BadVersionError()
        if op == "set":
            versions[path] = current + 1
        elif op == "delete":
            versions[path] = None
    return None


class _MultiRead(namedtuple("_MultiRead", "paths")):
    """ZooKeeper's multiRead (3.6 and later; opcode 22): a getData of each path in one
    request, each answered on its own (its data and stat, or its error), nothing all or
    nothing about it. kazoo has none: this is the request as kazoo's connection sends
    any other (`type`, `serialize`, `deserialize`)."""

    type = 22

    def serialize(self) -> bytearray:
        body = bytearray()
        for path in self.paths:
            body += MultiHeader(GetData.type, False, -1).serialize()
            body += write_string(path) + b"\0"  # no watch
        return body + multiheader_struct.pack(-1, True, -1)

    @classmethod
    def deserialize(cls, buffer, offset: int) -> list:
        answers: list = []
        while True:
            kind, done, _ = multiheader_struct.unpack_from(buffer, offset)
            offset += multiheader_struct.size
            if done:
                return answers
            if kind == GetData.type:
                data, offset = read_buffer(buffer, offset)
                answers.append((data, ZnodeStat._make(stat_struct.unpack_from(buffer, offset))))
                offset += stat_struct.size
            elif kind == -1:
                code = int_struct.unpack_from(buffer, offset)[0]
                offset += int_struct.size
                answers.append(EXCEPTIONS[code]())
            else:
                raise ValueError(f"multiRead answered an operation of type {kind}")


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
