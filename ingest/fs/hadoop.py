"""Any Hadoop filesystem URI (``hdfs://``, also ``file://``, ``s3a://`` ...) through Spark's JVM.

Driver side only: it calls Hadoop's Java FileSystem API over py4j, which exists in the driver
process. Every call is a round trip to the JVM, so files are buffered in 1 MiB chunks; bulk
data should be written by Spark or pyarrow at ``uri(path)``, not through this class.
"""

from __future__ import annotations

import io
from typing import BinaryIO

from py4j.protocol import Py4JJavaError

from ingest.fs.base import FileStatus, FileSystem, norm, temp_sibling

_BUFFER = 1 << 20


def _java_class(err: Py4JJavaError) -> str:
    return err.java_exception.getClass().getName()


class _JavaOut(io.RawIOBase):
    def __init__(self, stream):
        self._stream = stream

    def writable(self) -> bool:
        return True

    def write(self, b) -> int:
        data = bytearray(b)  # py4j passes bytearray as a Java byte[]
        self._stream.write(data)
        return len(data)

    def close(self) -> None:
        if not self.closed:
            try:
                self._stream.close()
            finally:
                super().close()


class _JavaIn(io.RawIOBase):
    def __init__(self, stream):
        self._stream = stream

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        data = bytes(self._stream.readNBytes(len(b)))  # a byte[] comes back as bytes
        b[: len(data)] = data
        return len(data)

    def close(self) -> None:
        if not self.closed:
            try:
                self._stream.close()
            finally:
                super().close()


class HadoopFileSystem(FileSystem):
    """A directory under a Hadoop filesystem URI, through ``org.apache.hadoop.fs`` over py4j.

    ``spark`` is a SparkSession (its Hadoop configuration is used: Kerberos, HA NameNodes and
    the rest come from the cluster's config as for Spark itself) or a py4j ``JVMView`` (then a
    fresh ``Configuration()`` is used).

    ``rename_if_absent`` calls ``FileContext.rename(src, dst, Options.Rename.NONE)``. On HDFS
    that is one NameNode operation that fails with FileAlreadyExistsException when ``dst``
    exists (file or directory): atomic, never replacing. Plain ``FileSystem.rename`` would
    move ``src`` *into* an existing directory and, on the local filesystem, may replace a file.
    Filesystems without a native rename-with-options (the local one, object stores) get
    Hadoop's default implementation: check that ``dst`` is absent, then rename. That race is
    accepted the same way as for LocalFileSystem's fallback and documented in ingest/README.md.
    """

    def __init__(self, spark, root: str):
        if hasattr(spark, "_jsc"):
            self._jvm = spark._jvm
            conf = spark._jsc.hadoopConfiguration()
        else:
            self._jvm = spark
            conf = self._jvm.org.apache.hadoop.conf.Configuration()
        hfs = self._jvm.org.apache.hadoop.fs
        self._Path = hfs.Path
        root_path = hfs.Path(root)
        self._fs = root_path.getFileSystem(conf)
        # Qualified: a scheme-less root resolves against fs.defaultFS once, here.
        self.root = self._fs.makeQualified(root_path).toString().rstrip("/")
        self._fc = hfs.FileContext.getFileContext(self._fs.getUri(), conf)
        self._rename_none = self._options(hfs.Options.Rename.NONE)
        self._rename_overwrite = self._options(hfs.Options.Rename.OVERWRITE)

    def _options(self, value):
        # Java varargs: py4j needs a real Options.Rename[] array.
        arr = self._jvm.java.lang.reflect.Array.newInstance(value.getDeclaringClass(), 1)
        arr[0] = value
        return arr

    def __repr__(self) -> str:
        return f"HadoopFileSystem({self.root!r})"

    def _p(self, path: str):
        rel = norm(path)
        return self._Path(f"{self.root}/{rel}" if rel else self.root)

    def _status(self, path: str, st) -> FileStatus:
        is_dir = bool(st.isDirectory())
        return FileStatus(norm(path), is_dir, 0 if is_dir else int(st.getLen()))

    def status(self, path: str) -> FileStatus | None:
        try:
            return self._status(path, self._fs.getFileStatus(self._p(path)))
        except Py4JJavaError as e:
            if _java_class(e) == "java.io.FileNotFoundException":
                return None
            raise

    def list(self, path: str) -> list[FileStatus]:
        rel = norm(path)
        st = self.status(rel)
        if st is None:
            return []
        if not st.is_dir:
            raise NotADirectoryError(path)
        out = []
        for child in self._fs.listStatus(self._p(rel)):
            name = child.getPath().getName()
            out.append(self._status(f"{rel}/{name}" if rel else name, child))
        return sorted(out, key=lambda s: s.path)

    def mkdirs(self, path: str) -> None:
        self._fs.mkdirs(self._p(path))

    def open_write(self, path: str) -> BinaryIO:
        # create() makes missing parents; True = overwrite.
        return io.BufferedWriter(_JavaOut(self._fs.create(self._p(path), True)), _BUFFER)

    def open_read(self, path: str) -> BinaryIO:
        try:
            stream = self._fs.open(self._p(path))
        except Py4JJavaError as e:
            if _java_class(e) == "java.io.FileNotFoundException":
                raise FileNotFoundError(path) from e
            raise
        return io.BufferedReader(_JavaIn(stream), _BUFFER)

    def _rename(self, src: str, dst: str, options) -> bool:
        src_p, dst_p = self._p(src), self._p(dst)
        self._fs.mkdirs(dst_p.getParent())  # rename needs dst's parent to exist
        try:
            self._fc.rename(src_p, dst_p, options)
        except Py4JJavaError as e:
            name = _java_class(e)
            if name == "org.apache.hadoop.fs.FileAlreadyExistsException":
                return False
            if name == "java.io.FileNotFoundException":
                raise FileNotFoundError(f"rename source missing: {src}") from e
            # A file onto a directory (or the reverse) is refused with a plain IOException
            # ("must both be directories") before the existence check: still "dst exists".
            if self._fs.exists(dst_p) and self._fs.exists(src_p):
                return False
            raise
        return True

    def rename_if_absent(self, src: str, dst: str) -> bool:
        return self._rename(src, dst, self._rename_none)

    def write_bytes(self, path: str, data: bytes) -> None:
        # Rename.OVERWRITE replaces a file in one NameNode operation on HDFS.
        tmp = temp_sibling(path)
        with self.open_write(tmp) as f:
            f.write(data)
        try:
            self._rename(tmp, path, self._rename_overwrite)
        except BaseException:
            self.delete(tmp)
            raise

    def delete(self, path: str, recursive: bool = False) -> bool:
        p = self._p(path)
        if not self._fs.exists(p):
            return False
        try:
            return bool(self._fs.delete(p, recursive))
        except Py4JJavaError as e:
            # HDFS: PathIsNotEmptyDirectoryException; local: a plain IOException.
            raise OSError(f"cannot delete {path}: {e.java_exception.getMessage()}") from e

    def uri(self, path: str = "") -> str:
        return self._p(path).toString()
