"""Filesystems for the load's root: local (default), WebHDFS, and Hadoop URIs through Spark.

``filesystem_for(root)`` picks one from the root's scheme:

- ``/data/x`` or ``file:///data/x``      -> LocalFileSystem
- ``webhdfs://nn:9870/data/x``           -> WebHdfsFileSystem (http; ``swebhdfs://`` for https)
- ``hdfs://nn:8020/data/x`` (any other)  -> HadoopFileSystem: through the Spark driver's JVM
  when given the session, else (in a task, in an Airflow worker) through the process's own
  JVM (``ingest.fs.jvm``)

``via="hadoop"`` takes Hadoop's API for every root, ``file://`` included: the hdfs:// code
path on a local disk (tests, and local mounts that only Hadoop should write).
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlparse

from ingest.fs.base import FileStatus, FileSystem, norm
from ingest.fs.local import LocalFileSystem

# How a root is reached: by its scheme, or Hadoop's FileSystem API whatever the scheme.
VIA = ("auto", "hadoop")

__all__ = [
    "FileStatus",
    "FileSystem",
    "HadoopFileSystem",
    "LocalFileSystem",
    "WebHdfsFileSystem",
    "filesystem_for",
    "norm",
]


def __getattr__(name: str):
    # Imported on first use: the WebHDFS client (hdfs, requests) costs ~0.6 s of every
    # Python worker's first task, for roots that never use it (docs/benchmarks.md).
    if name == "WebHdfsFileSystem":
        from ingest.fs.webhdfs import WebHdfsFileSystem

        return WebHdfsFileSystem
    if name == "HadoopFileSystem":
        from ingest.fs.hadoop import HadoopFileSystem

        return HadoopFileSystem
    raise AttributeError(name)


def filesystem_for(
    root_uri: str,
    spark=None,
    *,
    user: str | None = None,
    kerberos: bool = False,
    via: str = "auto",
) -> FileSystem:
    """The filesystem for a root. ``user``/``kerberos`` apply to WebHDFS only; Hadoop URIs
    take identity and security from the Hadoop configuration (the session's, or
    HADOOP_CONF_DIR's plus the driver's spark.hadoop.* keys in a task)."""
    if via not in VIA:
        raise ValueError(f"via={via!r}: expected one of {', '.join(VIA)}")
    u = urlparse(root_uri)
    if via == "hadoop":
        if u.scheme == "":
            root_uri = Path(root_uri).resolve().as_uri()
        return _hadoop(root_uri, spark)
    if u.scheme in ("", "file"):
        return LocalFileSystem(root_uri)
    if u.scheme in ("webhdfs", "swebhdfs"):
        from ingest.fs.webhdfs import WebHdfsFileSystem

        http = "https" if u.scheme == "swebhdfs" else "http"
        return WebHdfsFileSystem(
            f"{http}://{u.netloc}", u.path or "/", user=user, kerberos=kerberos
        )
    return _hadoop(root_uri, spark)


def _hadoop(root_uri: str, spark):
    from ingest.fs.hadoop import HadoopFileSystem, task_hadoop_conf
    from ingest.fs.jvm import hadoop_jvm

    if spark is not None:
        return HadoopFileSystem(spark, root_uri)
    return HadoopFileSystem(hadoop_jvm(), root_uri, conf=task_hadoop_conf())
