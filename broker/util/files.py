"""Durable file writes: the one way the product replaces a small file (checkpoints, metadata,
manifests) and the primitives the log writes its segments and indexes with.

A rename is atomic but not durable until its directory is on disk, and a file's data is not
on disk until the file is fsynced: `write_atomically` does both, in the order that leaves
either the old file or the new one, whole, after a crash at any point.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

TEMP_SUFFIX = ".tmp"


def write_all(fd: int, data) -> None:
    """Write all of `data` (bytes-like) to `fd`; os.write may write less than asked."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def fsync_dir(directory: str | os.PathLike, sync=None) -> None:
    """Make the entries of `directory` (files created, renamed or deleted in it) durable.

    A filesystem that cannot sync a directory at all answers EINVAL; there is nothing more
    to do there, so that is not an error. Any other failure (EIO) is raised: the caller
    must not report the change as durable.
    """
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        (sync or os.fsync)(fd)
    except OSError as exc:
        if exc.errno != errno.EINVAL:
            raise
    finally:
        os.close(fd)


def fsync_file(path: str | os.PathLike, sync=None) -> None:
    """Make the data of the file at `path` durable (its name needs `fsync_dir` too).
    `sync` (both functions): what syncs the fd; broker/log/flusher.py passes one that
    keeps a dup of it to sync off the event loop."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        (sync or os.fsync)(fd)
    finally:
        os.close(fd)


def write_atomically(
    path: str | os.PathLike,
    data: bytes | str,
    *,
    temp: str | os.PathLike | None = None,
    durable: bool = True,
) -> None:
    """Replace the file at `path` with `data` (str is written as UTF-8), durably.

    The data goes to `temp` (default: `path` + ".tmp" beside it; it must be in the same
    directory), which is fsynced, renamed over `path` and followed by an fsync of the
    directory. Readers see the old file or the new one, never a part; on an error the
    temporary file is removed and the old file is left as it was.

    `durable=False` skips both fsyncs, for a file whose loss or garbling in a power
    failure its reader detects and repairs (the renamed file may then be missing, empty
    or partly written; a process crash alone leaves it whole).
    """
    path = Path(path)
    temp = Path(temp) if temp is not None else path.with_name(path.name + TEMP_SUFFIX)
    if isinstance(data, str):
        data = data.encode("utf-8")
    try:
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o666)
        try:
            write_all(fd, data)
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temp, path)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    if durable:
        fsync_dir(path.parent)
