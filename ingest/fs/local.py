"""The local filesystem (the default root, ``file://``)."""

from __future__ import annotations

import ctypes
import errno
import io
import os
import shutil
import stat
from pathlib import Path
from typing import BinaryIO
from urllib.parse import unquote, urlparse

from broker.util.files import fsync_dir, write_atomically
from ingest.fs.base import FileStatus, FileSystem, norm, temp_sibling

_AT_FDCWD = -100
_RENAME_NOREPLACE = 1


def _load_renameat2():
    """glibc's renameat2, or None. RENAME_NOREPLACE makes the kernel refuse to replace an
    existing destination in the same atomic step as the rename, for files and directories."""
    try:
        fn = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    fn.restype = ctypes.c_int
    return fn


_renameat2 = _load_renameat2()


class _FsyncOnClose(io.BufferedWriter):
    """A staged file must be on disk before the commit names it, so close() fsyncs."""

    def close(self) -> None:
        if not self.closed:
            self.flush()
            os.fsync(self.fileno())
        super().close()


class LocalFileSystem(FileSystem):
    """A directory on the local disk.

    ``rename_if_absent`` uses ``renameat2(RENAME_NOREPLACE)`` (Linux, glibc >= 2.28), which is
    atomic and never replaces anything. Where that is missing or the filesystem refuses the
    flag, a file is moved by ``link(src, dst)`` (fails atomically if ``dst`` exists) and then
    ``unlink(src)``: a crash in between leaves both names on one inode, which the commit's
    roll-forward recognises (same size) and finishes. A directory falls back to checking that
    ``dst`` is absent and then ``rename``: the accepted race is another process creating an
    *empty* directory at ``dst`` in that instant (POSIX rename replaces only empty
    directories); nothing in the load creates directories at names the commit renames to.
    """

    def __init__(self, root: str | os.PathLike):
        root = os.fspath(root)
        if root.startswith("file:"):
            root = unquote(urlparse(root).path)
        self.root = Path(root).absolute()

    def __repr__(self) -> str:
        return f"LocalFileSystem({str(self.root)!r})"

    def _abs(self, path: str) -> Path:
        rel = norm(path)
        return self.root / rel if rel else self.root

    def status(self, path: str) -> FileStatus | None:
        try:
            st = self._abs(path).stat()
        except (FileNotFoundError, NotADirectoryError):
            return None
        is_dir = stat.S_ISDIR(st.st_mode)
        return FileStatus(norm(path), is_dir, 0 if is_dir else st.st_size)

    def list(self, path: str) -> list[FileStatus]:
        rel = norm(path)
        try:
            entries = list(os.scandir(self._abs(rel)))
        except FileNotFoundError:
            return []
        out = []
        for e in entries:
            is_dir = e.is_dir()
            child = f"{rel}/{e.name}" if rel else e.name
            out.append(FileStatus(child, is_dir, 0 if is_dir else e.stat().st_size))
        return sorted(out, key=lambda s: s.path)

    def mkdirs(self, path: str) -> None:
        self._abs(path).mkdir(parents=True, exist_ok=True)

    def open_write(self, path: str) -> BinaryIO:
        target = self._abs(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        return _FsyncOnClose(io.FileIO(target, "w"))

    def open_read(self, path: str) -> BinaryIO:
        return open(self._abs(path), "rb")

    def write_bytes(self, path: str, data: bytes) -> None:
        target = self._abs(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(target, data, temp=self._abs(temp_sibling(path)))

    def rename_if_absent(self, src: str, dst: str) -> bool:
        s, d = self._abs(src), self._abs(dst)
        if not os.path.lexists(s):
            raise FileNotFoundError(f"rename source missing: {src}")
        d.parent.mkdir(parents=True, exist_ok=True)
        done = self._renameat2(s, d)
        if done is None:
            done = self._rename_fallback(s, d)
        if done:
            fsync_dir(d.parent)
            if s.parent != d.parent:
                fsync_dir(s.parent)
        return done

    @staticmethod
    def _renameat2(s: Path, d: Path) -> bool | None:
        """True/False, or None when the kernel or filesystem does not support the flag."""
        if _renameat2 is None:
            return None
        rc = _renameat2(_AT_FDCWD, os.fsencode(s), _AT_FDCWD, os.fsencode(d), _RENAME_NOREPLACE)
        if rc == 0:
            return True
        err = ctypes.get_errno()
        if err == errno.EEXIST:
            return False
        if err in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP):
            return None
        raise OSError(err, os.strerror(err), str(s), None, str(d))

    @staticmethod
    def _rename_fallback(s: Path, d: Path) -> bool:
        if not s.is_dir():
            try:
                os.link(s, d)
            except FileExistsError:
                return False
            except OSError as e:
                if e.errno not in (errno.EPERM, errno.ENOTSUP, errno.EXDEV, errno.EMLINK):
                    raise
                # No hard links here: fall through to check-then-rename.
            else:
                os.unlink(s)
                return True
        if os.path.lexists(d):
            return False
        os.rename(s, d)
        return True

    def delete(self, path: str, recursive: bool = False) -> bool:
        target = self._abs(path)
        if not os.path.lexists(target):
            return False
        if target.is_dir() and not target.is_symlink():
            if recursive:
                shutil.rmtree(target)
            else:
                target.rmdir()  # OSError(ENOTEMPTY) when not empty, as the contract says
        else:
            target.unlink()
        return True

    def uri(self, path: str = "") -> str:
        return self._abs(path).as_uri()
