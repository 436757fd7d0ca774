"""Filesystems for the load's root: local (default), WebHDFS, and Hadoop URIs through Spark.

``filesystem_for(root)`` picks one from the root's scheme:

- ``/data/x`` or ``file:///data/x``      -> LocalFileSystem
- ``webhdfs://nn:9870/data/x``           -> WebHdfsFileSystem (http; ``swebhdfs://`` for https)
- ``hdfs://nn:8020/data/x`` (any other)  -> HadoopFileSystem through the Spark driver's JVM
"""

from __future__ import annotations

from urllib.parse import urlparse

from ingest.fs.base import FileStatus, FileSystem, norm
from ingest.fs.local import LocalFileSystem

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
) -> FileSystem:
    """The filesystem for a root. ``user``/``kerberos`` apply to WebHDFS only; Hadoop URIs
    take identity and security from the Spark session's Hadoop configuration."""
    u = urlparse(root_uri)
    if u.scheme in ("", "file"):
        return LocalFileSystem(root_uri)
    if u.scheme in ("webhdfs", "swebhdfs"):
        from ingest.fs.webhdfs import WebHdfsFileSystem

        http = "https" if u.scheme == "swebhdfs" else "http"
        return WebHdfsFileSystem(
            f"{http}://{u.netloc}", u.path or "/", user=user, kerberos=kerberos
        )
    if spark is None:
        raise ValueError(f"{root_uri}: a {u.scheme}:// root needs the Spark session (spark=...)")
    from ingest.fs.hadoop import HadoopFileSystem

    return HadoopFileSystem(spark, root_uri)
