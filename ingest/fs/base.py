"""The one filesystem interface the load needs, and the path rules its implementations share.

Paths are POSIX-style strings relative to the filesystem's root (``"data/t/dt=.../x.parquet"``);
``""`` is the root itself. Keeping every path relative lets the commit protocol and the layout
ignore whether the root is a local directory, a WebHDFS URL or an ``hdfs://`` URI.
"""

from __future__ import annotations

import posixpath
import secrets
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import BinaryIO


@dataclass(frozen=True)
class FileStatus:
    path: str  # relative to the filesystem root, like every path given to the interface
    is_dir: bool
    size: int  # bytes; 0 for directories


def norm(path: str) -> str:
    """Canonical relative form: no leading slash, no ``.`` or empty segments, no ``..``."""
    parts = [p for p in path.replace("\\", "/").split("/") if p not in ("", ".")]
    if ".." in parts:
        raise ValueError(f"path escapes the root: {path!r}")
    return "/".join(parts)


def parent(path: str) -> str:
    return posixpath.dirname(norm(path))


def temp_sibling(path: str) -> str:
    """A hidden name next to ``path``: Spark, Hive and Trino skip names starting with '.'."""
    path = norm(path)
    head, name = posixpath.split(path)
    return posixpath.join(head, f".{name}.{secrets.token_hex(4)}.tmp")


class FileSystem(ABC):
    """What the commit protocol and the writers need from a filesystem, and nothing more.

    Contract (checked by tests/ingest/test_fs_contract.py for every implementation):

    - ``list`` is non-recursive, sorted by path, and returns ``[]`` for a missing directory;
      listing a file raises ``NotADirectoryError``.
    - ``open_write`` creates missing parents and truncates an existing file. The file is
      not atomic: writers use it only under staging.
    - ``write_bytes`` replaces the file as atomically as the filesystem allows (temp + rename).
    - ``rename_if_absent(src, dst)`` is the commit's atomic primitive: it moves ``src`` to
      ``dst`` and returns True, or returns False and changes nothing when ``dst`` exists. It
      never overwrites. It creates ``dst``'s parent directories first (HDFS renames fail on a
      missing parent) and raises ``FileNotFoundError`` when ``src`` does not exist.
    - ``delete`` returns whether something was there; deleting a non-empty directory without
      ``recursive`` raises ``OSError``.
    """

    @abstractmethod
    def status(self, path: str) -> FileStatus | None:
        """The status of ``path``, or None when nothing is there."""

    def exists(self, path: str) -> bool:
        return self.status(path) is not None

    @abstractmethod
    def list(self, path: str) -> list[FileStatus]: ...

    @abstractmethod
    def mkdirs(self, path: str) -> None: ...

    @abstractmethod
    def open_write(self, path: str) -> BinaryIO: ...

    @abstractmethod
    def open_read(self, path: str) -> BinaryIO: ...

    def read_bytes(self, path: str) -> bytes:
        with self.open_read(path) as f:
            return f.read()

    def write_bytes(self, path: str, data: bytes) -> None:
        """Temp file, then rename. Where the filesystem cannot rename over a file (WebHDFS),
        the old file is deleted first: a reader then briefly sees no file, never a torn one."""
        tmp = temp_sibling(path)
        with self.open_write(tmp) as f:
            f.write(data)
        try:
            if not self.rename_if_absent(tmp, path):
                self.delete(path)
                if not self.rename_if_absent(tmp, path):
                    raise FileExistsError(f"{path} reappeared while being replaced")
        except BaseException:
            self.delete(tmp)
            raise

    @abstractmethod
    def rename_if_absent(self, src: str, dst: str) -> bool: ...

    @abstractmethod
    def delete(self, path: str, recursive: bool = False) -> bool: ...

    @abstractmethod
    def uri(self, path: str = "") -> str:
        """A URI for ``path`` that Spark (and pyarrow, for file://) can read."""
