"""HDFS over WebHDFS (the ``hdfs`` package): pure Python, so it works on executors too."""

from __future__ import annotations

import io
import posixpath
from typing import BinaryIO
from urllib.parse import urlparse

from hdfs import HdfsError, InsecureClient

from ingest.fs.base import FileStatus, FileSystem, norm


class _Upload(io.RawIOBase):
    """A writable file over the client's streaming CREATE; the upload finishes on close()."""

    def __init__(self, client, path: str):
        self._ctx = client.write(path, overwrite=True)
        self._writer = self._ctx.__enter__()

    def writable(self) -> bool:
        return True

    def write(self, b) -> int:
        data = bytes(b)
        self._writer.write(data)
        return len(data)

    def close(self) -> None:
        if not self.closed:
            try:
                self._ctx.__exit__(None, None, None)  # joins the upload and raises its error
            finally:
                super().close()


class _Download(io.RawIOBase):
    """A readable file over OPEN; closes the HTTP response on close()."""

    def __init__(self, client, path: str):
        self._ctx = client.read(path)
        self._raw = self._ctx.__enter__()

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        data = self._raw.read(len(b))
        b[: len(data)] = data
        return len(data)

    def close(self) -> None:
        if not self.closed:
            try:
                self._ctx.__exit__(None, None, None)
            finally:
                super().close()


def _is_missing(err: HdfsError) -> bool:
    return getattr(err, "exception", None) == "FileNotFoundException"


class WebHdfsFileSystem(FileSystem):
    """A directory of an HDFS cluster, reached through the NameNode's WebHDFS REST API.

    ``url`` is the NameNode's HTTP address (``http://namenode:9870``; several separated by
    ``;`` for HA, as the ``hdfs`` client accepts); ``root`` an absolute HDFS path.

    HDFS's RENAME never replaces an existing file: it answers ``false``, which is exactly
    ``rename_if_absent``. It does move ``src`` *into* ``dst`` when ``dst`` is a directory, so
    we refuse when anything is at ``dst`` first; the accepted race is a directory appearing
    at ``dst`` between that check and the rename, which nothing in the load does.
    """

    def __init__(
        self,
        url: str,
        root: str = "/",
        user: str | None = None,
        kerberos: bool = False,
        timeout: float | None = 60.0,
    ):
        self.url = url
        self.root = "/" + norm(root)
        if kerberos:
            try:
                from hdfs.ext.kerberos import KerberosClient
            except ImportError as e:  # requests-kerberos is an optional extra of `hdfs`
                raise RuntimeError(
                    "kerberos=True needs the requests-kerberos package (pip install hdfs[kerberos])"
                ) from e
            self.client = KerberosClient(url, root=self.root, proxy=user, timeout=timeout)
        else:
            self.client = InsecureClient(url, user=user, root=self.root, timeout=timeout)

    def __repr__(self) -> str:
        return f"WebHdfsFileSystem({self.url!r}, {self.root!r})"

    def _abs(self, path: str) -> str:
        rel = norm(path)
        return posixpath.join(self.root, rel) if rel else self.root

    def status(self, path: str) -> FileStatus | None:
        st = self.client.status(self._abs(path), strict=False)
        if st is None:
            return None
        is_dir = st["type"] == "DIRECTORY"
        return FileStatus(norm(path), is_dir, 0 if is_dir else int(st["length"]))

    def list(self, path: str) -> list[FileStatus]:
        rel = norm(path)
        try:
            entries = self.client.list(self._abs(rel), status=True)
        except HdfsError as e:
            if _is_missing(e):
                return []
            if "is not a directory" in str(e):
                raise NotADirectoryError(path) from e
            raise
        out = []
        for name, st in entries:
            is_dir = st["type"] == "DIRECTORY"
            child = f"{rel}/{name}" if rel else name
            out.append(FileStatus(child, is_dir, 0 if is_dir else int(st["length"])))
        return sorted(out, key=lambda s: s.path)

    def mkdirs(self, path: str) -> None:
        self.client.makedirs(self._abs(path))

    def open_write(self, path: str) -> BinaryIO:
        # CREATE makes missing parents itself, as the contract asks.
        return io.BufferedWriter(_Upload(self.client, self._abs(path)), 1 << 20)

    def open_read(self, path: str) -> BinaryIO:
        try:
            return io.BufferedReader(_Download(self.client, self._abs(path)), 1 << 20)
        except HdfsError as e:
            if _is_missing(e):
                raise FileNotFoundError(path) from e
            raise

    def rename_if_absent(self, src: str, dst: str) -> bool:
        if not self.exists(src):
            raise FileNotFoundError(f"rename source missing: {src}")
        if self.exists(dst):
            return False
        dst_abs = self._abs(dst)
        self.client.makedirs(posixpath.dirname(dst_abs))
        # The client's rename() turns HDFS's `false` into an exception without saying why;
        # the raw RENAME call gives us the boolean itself.
        moved = self.client._rename(self._abs(src), destination=dst_abs).json()["boolean"]
        if moved:
            return True
        if not self.exists(src):
            raise FileNotFoundError(f"rename source vanished: {src}")
        return False  # dst appeared meanwhile: HDFS refused to replace it

    def delete(self, path: str, recursive: bool = False) -> bool:
        try:
            return bool(self.client.delete(self._abs(path), recursive=recursive))
        except HdfsError as e:
            if getattr(e, "exception", None) == "PathIsNotEmptyDirectoryException":
                raise OSError(f"directory not empty: {path}") from e
            raise

    def uri(self, path: str = "") -> str:
        """``webhdfs://host:port/path`` (``swebhdfs`` for https): Hadoop's WebHdfsFileSystem
        reads it, so Spark needs nothing but the NameNode's HTTP address."""
        first = self.url.split(";")[0]
        u = urlparse(first)
        scheme = "swebhdfs" if u.scheme == "https" else "webhdfs"
        return f"{scheme}://{u.netloc}{self._abs(path)}"
