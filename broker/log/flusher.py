"""Log fsyncs off the event loop (docs/contracts/log.md, "Flush and recovery"; the
design is in broker/log/README.md, "Flushes and the event loop").

A flush is gathered on the event loop: the page-cache writes it needs (index entries,
the leader-epoch file) happen there, and every fsync it would have done is replaced by
an `os.dup` of the fd it would have synced (`DeferredSyncs`). The dups are the job's
own: the segment may be sealed, renamed `.deleted`, closed or truncated meanwhile and
the fds stay valid. `ThreadFlusher` runs the fsyncs on one thread per log dir, in
submission order, and tells the loop when they returned: only then does the log move
its recovery point. `submit` without a running loop (start-up, shutdown, unit tests)
runs the work at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

Fsync = Callable[[int], None]
# Told (error or None, seconds the work took) on the event loop once the work returned.
Done = Callable[[BaseException | None, float], None]


class DeferredSyncs:
    """Stands in for `os.fsync` while a flush is gathered: keeps a dup of each fd."""

    def __init__(self) -> None:
        self.fds: list[int] = []

    def __call__(self, fd: int) -> None:
        self.fds.append(os.dup(fd))

    def run(self, fsync: Fsync) -> None:
        """fsync every fd in order (on the flusher's thread), then close them all."""
        try:
            for fd in self.fds:
                try:
                    fsync(fd)
                except OSError as exc:
                    # A filesystem that cannot sync a directory answers EINVAL (as
                    # broker.util.files.fsync_dir): nothing more to do there.
                    if exc.errno != errno.EINVAL:
                        raise
        finally:
            self.close()

    def close(self) -> None:
        fds, self.fds = self.fds, []
        for fd in fds:
            with contextlib.suppress(OSError):
                os.close(fd)


def run_inline(work: Callable[[], None], done: Done) -> None:
    started = time.perf_counter()
    try:
        work()
    except OSError as exc:
        done(exc, time.perf_counter() - started)
        return
    done(None, time.perf_counter() - started)


class ThreadFlusher:
    """One thread for one log dir's fsyncs: jobs run in submission order, so a job's
    completion means every earlier job of the dir completed (a checkpoint submitted
    after a flush is never durable before it). `fsync` is replaceable for tests."""

    def __init__(self, name: str, fsync: Fsync = os.fsync) -> None:
        self.fsync = fsync
        self._executor = ThreadPoolExecutor(1, thread_name_prefix=name)

    def submit_syncs(self, syncs: DeferredSyncs, done: Done) -> None:
        self.submit(lambda: syncs.run(self.fsync), done)

    def submit(self, work: Callable[[], None], done: Done) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no event loop to keep free: do it now
            run_inline(work, done)
            return

        def timed() -> float:
            started = time.perf_counter()
            work()
            return time.perf_counter() - started

        def finished(future: asyncio.Future) -> None:
            if future.cancelled():
                return
            error = future.exception()
            done(error, 0.0 if error is not None else future.result())

        loop.run_in_executor(self._executor, timed).add_done_callback(finished)

    def shutdown(self) -> None:
        """Wait for the jobs submitted (their fsyncs are then done) and stop the thread."""
        self._executor.shutdown(wait=True)
