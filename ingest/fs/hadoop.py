"""Any Hadoop filesystem URI (``hdfs://``, also ``file://``, ``s3a://`` ...) through a JVM.

Hadoop's Java FileSystem API over py4j: on the driver through the Spark session's JVM and
Hadoop configuration; in a Spark task (or any process without a session) through a JVM of
the process's own (``ingest.fs.jvm``) configured from ``HADOOP_CONF_DIR`` plus the
driver's ``spark.hadoop.*`` keys. Every call is a round trip to the JVM and bytes cross
py4j slowly, so ``open_write`` spools to a local file and has the JVM copy it on close.
"""

from __future__ import annotations

import io
import json
import os
import tempfile
from typing import BinaryIO

from py4j.java_gateway import JVMView
from py4j.protocol import Py4JJavaError

from ingest.fs.base import FileStatus, FileSystem, norm, temp_sibling

_BUFFER = 1 << 20

# The driver's spark.hadoop.* settings, as JSON, handed to the tasks' JVMs (a Spark local
# property travels with every task the driver starts; spark_runner sets it).
CONF_PROPERTY = "ingest.hadoop.conf"


def spark_hadoop_conf(spark) -> dict[str, str]:
    """The session's spark.hadoop.* keys, without the prefix: what Spark adds to Hadoop's
    site files, so the tasks' JVMs configure Hadoop as the driver's does."""
    prefix = "spark.hadoop."
    return {
        k[len(prefix) :]: v
        for k, v in spark.sparkContext.getConf().getAll()
        if k.startswith(prefix)
    }


def task_hadoop_conf() -> dict[str, str]:
    """In a Spark task, the driver's spark.hadoop.* keys; elsewhere none."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    text = ctx.getLocalProperty(CONF_PROPERTY) if ctx is not None else None
    return json.loads(text) if text else {}


def _java_class(err: Py4JJavaError) -> str:
    return err.java_exception.getClass().getName()


class _Upload(io.BufferedWriter):
    """A file written to local disk, then copied into place by the JVM on close (one
    py4j call for the whole file). A process dying before close leaves nothing there."""

    def __init__(self, hfs: HadoopFileSystem, dst) -> None:
        fd, self._local = tempfile.mkstemp(prefix="ingest-upload-")
        super().__init__(io.FileIO(fd, "wb"), _BUFFER)
        self._hfs, self._dst = hfs, dst

    def close(self) -> None:
        if self.closed:
            return
        try:
            super().close()
            self._hfs._copy_from_local(self._local, self._dst)
        finally:
            os.unlink(self._local)


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
    fresh ``Configuration()`` -- the site files on the JVM's classpath -- with ``conf`` set
    on it).

    ``rename_if_absent`` calls ``FileContext.rename(src, dst, Options.Rename.NONE)``. On HDFS
    that is one NameNode operation that fails with FileAlreadyExistsException when ``dst``
    exists (file or directory): atomic, never replacing. Plain ``FileSystem.rename`` would
    move ``src`` *into* an existing directory and, on the local filesystem, may replace a file.
    Filesystems without a native rename-with-options (the local one, object stores) get
    Hadoop's default implementation: check that ``dst`` is absent, then rename. That race is
    accepted the same way as for LocalFileSystem's fallback and documented in ingest/README.md.
    """

    def __init__(self, spark, root: str, conf: dict[str, str] | None = None):
        if isinstance(spark, JVMView):  # (any attribute of a JVMView exists: test the type)
            self._jvm = spark
            hadoop_conf = self._jvm.org.apache.hadoop.conf.Configuration()
            for key, value in (conf or {}).items():
                hadoop_conf.set(key, value)
            conf = hadoop_conf
        else:
            self._jvm = spark._jvm
            conf = spark._jsc.hadoopConfiguration()
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
        return _Upload(self, self._p(path))

    def _copy_from_local(self, local: str, dst) -> None:
        # FileUtil.copy under it: create(dst, overwrite) makes missing parents.
        self._fs.copyFromLocalFile(False, True, self._Path("file", None, local), dst)

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
