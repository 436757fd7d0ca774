"""One contract for every FileSystem: local, Hadoop (through a real Spark JVM, on file://) and
WebHDFS (the real `hdfs` client over HTTP against tests/helpers/webhdfs_server.py)."""

from __future__ import annotations

import pyarrow.fs as pafs
import pytest

from ingest.fs import (
    FileStatus,
    HadoopFileSystem,
    LocalFileSystem,
    WebHdfsFileSystem,
    filesystem_for,
)


def test_missing_and_empty(fs):
    assert fs.list("") == []
    assert fs.list("no/such/dir") == []
    assert fs.status("nothing") is None
    assert not fs.exists("nothing")
    assert fs.delete("nothing") is False


def test_write_read_round_trip_creates_parents(fs):
    fs.write_bytes("a/b/c.bin", b"\x00\x01payload")
    assert fs.read_bytes("a/b/c.bin") == b"\x00\x01payload"
    assert fs.status("a/b/c.bin") == FileStatus("a/b/c.bin", False, 9)
    assert fs.status("a/b") == FileStatus("a/b", True, 0)
    assert fs.exists("/a//b/./c.bin")  # paths are normalised the same way everywhere


def test_write_bytes_replaces_and_leaves_no_temp(fs):
    fs.write_bytes("d/m.json", b"first version, longer")
    fs.write_bytes("d/m.json", b"second")
    assert fs.read_bytes("d/m.json") == b"second"
    assert [s.path for s in fs.list("d")] == ["d/m.json"]


def test_streaming_write_and_read(fs):
    chunk = bytes(range(256)) * 4096  # 1 MiB
    with fs.open_write("s/big.bin") as f:
        for _ in range(3):
            f.write(chunk)
    assert fs.status("s/big.bin").size == 3 * len(chunk)
    with fs.open_read("s/big.bin") as f:
        assert f.read(10) == chunk[:10]
        rest = f.read()
    assert len(rest) == 3 * len(chunk) - 10
    assert rest[-len(chunk) :] == chunk
    with fs.open_write("s/big.bin") as f:  # open_write truncates
        f.write(b"short")
    assert fs.read_bytes("s/big.bin") == b"short"


def test_open_read_missing_raises(fs):
    with pytest.raises(FileNotFoundError):
        fs.read_bytes("missing.bin")


def test_list_is_shallow_sorted_and_typed(fs):
    fs.write_bytes("x/b.txt", b"bb")
    fs.write_bytes("x/a.txt", b"a")
    fs.write_bytes("x/sub/deep.txt", b"deep")
    fs.mkdirs("x/empty")
    assert fs.list("x") == [
        FileStatus("x/a.txt", False, 1),
        FileStatus("x/b.txt", False, 2),
        FileStatus("x/empty", True, 0),
        FileStatus("x/sub", True, 0),
    ]
    assert [s.path for s in fs.list("")] == ["x"]
    with pytest.raises(NotADirectoryError):
        fs.list("x/a.txt")


def test_mkdirs_is_idempotent(fs):
    fs.mkdirs("m/n/o")
    fs.mkdirs("m/n/o")
    assert fs.status("m/n/o").is_dir


def test_rename_if_absent_moves_and_creates_parent(fs):
    fs.write_bytes("stage/f", b"data")
    assert fs.rename_if_absent("stage/f", "final/dt=2026-01-01/hr=00/f") is True
    assert not fs.exists("stage/f")
    assert fs.read_bytes("final/dt=2026-01-01/hr=00/f") == b"data"


def test_rename_if_absent_never_replaces_a_file(fs):
    fs.write_bytes("src", b"new")
    fs.write_bytes("dst", b"old")
    assert fs.rename_if_absent("src", "dst") is False
    assert fs.read_bytes("src") == b"new"
    assert fs.read_bytes("dst") == b"old"


def test_rename_if_absent_never_moves_into_a_directory(fs):
    # HDFS's plain rename would put src at dst/src; the interface must refuse instead.
    fs.write_bytes("src", b"new")
    fs.mkdirs("dir")
    assert fs.rename_if_absent("src", "dir") is False
    assert fs.read_bytes("src") == b"new"
    assert fs.list("dir") == []


def test_rename_if_absent_directories(fs):
    fs.write_bytes("run/a/1", b"1")
    fs.write_bytes("run/a/2", b"22")
    assert fs.rename_if_absent("run/a", "done/a") is True
    assert [s.path for s in fs.list("done/a")] == ["done/a/1", "done/a/2"]
    fs.write_bytes("run/b/1", b"x")
    assert fs.rename_if_absent("run/b", "done/a") is False
    assert fs.read_bytes("done/a/1") == b"1"


def test_rename_if_absent_missing_source(fs):
    with pytest.raises(FileNotFoundError):
        fs.rename_if_absent("not-there", "dst")
    assert not fs.exists("dst")


def test_delete(fs):
    fs.write_bytes("del/f", b"x")
    fs.write_bytes("del/sub/g", b"y")
    with pytest.raises(OSError):
        fs.delete("del")  # not empty, not recursive
    assert fs.delete("del/f") is True
    assert fs.delete("del/f") is False
    fs.mkdirs("del/empty")
    assert fs.delete("del/empty") is True
    assert fs.delete("del", recursive=True) is True
    assert not fs.exists("del")


def test_paths_cannot_escape_the_root(fs):
    with pytest.raises(ValueError):
        fs.write_bytes("../outside", b"x")


@pytest.mark.parametrize("kind", ["local", "hadoop"])
def test_uri_is_readable_by_spark(make_fs, kind, spark):
    fs = make_fs(kind)
    fs.write_bytes("u/part.txt", b"line one\nline two\n")
    rows = [r.value for r in spark.read.text(fs.uri("u/part.txt")).collect()]
    assert rows == ["line one", "line two"]


def test_webhdfs_uri_names_the_namenode_path(make_fs):
    # Spark reads webhdfs:// with Hadoop's WebHdfsFileSystem on a cluster; the pip pyspark
    # bundle lacks its shaded Jersey runtime (ClassNotFoundException), so here we check the
    # URI's parts and that the path it names is the file we wrote.
    fs = make_fs("webhdfs")
    fs.write_bytes("u/part.txt", b"x")
    uri = fs.uri("u/part.txt")
    prefix = fs.url.replace("http://", "webhdfs://")
    assert uri == f"{prefix}/load/root/u/part.txt"
    assert fs.client.status("/load/root/u/part.txt")["length"] == 1


def test_file_uri_is_readable_by_pyarrow(make_fs):
    fs = make_fs("local")
    fs.write_bytes("p/x.bin", b"arrow")
    arrow_fs, path = pafs.FileSystem.from_uri(fs.uri("p/x.bin"))
    with arrow_fs.open_input_stream(path) as f:
        assert f.read() == b"arrow"


def test_filesystem_for_picks_by_scheme(tmp_path, spark):
    assert isinstance(filesystem_for(str(tmp_path)), LocalFileSystem)
    local = filesystem_for(tmp_path.as_uri())
    assert isinstance(local, LocalFileSystem) and local.root == tmp_path
    web = filesystem_for("webhdfs://nn.example:9870/data/load")
    assert isinstance(web, WebHdfsFileSystem)
    assert (web.url, web.root) == ("http://nn.example:9870", "/data/load")
    assert web.uri("data/x") == "webhdfs://nn.example:9870/data/load/data/x"
    secure = filesystem_for("swebhdfs://nn.example:9871/data")
    assert secure.url == "https://nn.example:9871"
    with pytest.raises(ValueError, match="via='nfs'"):
        filesystem_for(str(tmp_path), via="nfs")
    # Without a session at hand, a Hadoop root goes through the process's JVM: Spark's here.
    via = filesystem_for(str(tmp_path / "o"), via="hadoop")
    assert isinstance(via, HadoopFileSystem) and via.uri("a") == f"file:{tmp_path}/o/a"
    assert isinstance(filesystem_for(tmp_path.as_uri(), spark), LocalFileSystem)
    jvm_fs = HadoopFileSystem(spark, (tmp_path / "h").as_uri())
    assert jvm_fs.uri("a") == f"file:{tmp_path}/h/a"  # Hadoop's own spelling of file URIs


# A Spark task's Python worker has no JVM: ingest.fs.jvm starts one. A fresh interpreter
# (no Spark in it) does exactly what a task does with a Hadoop root.
_TASK_SIDE = """
import sys
from pyspark import SparkContext
from ingest.fs import HadoopFileSystem, filesystem_for
from ingest.fs import jvm

fs = filesystem_for(sys.argv[1], via="hadoop")
assert isinstance(fs, HadoopFileSystem) and SparkContext._jvm is None and jvm._gateway
with fs.open_write("_runs/r/staging/a/f.bin") as f:
    f.write(b"x" * (3 << 20))
assert fs.status("_runs/r/staging/a/f.bin").size == 3 << 20
assert fs.rename_if_absent("_runs/r/staging/a/f.bin", "data/t/f.bin")
fs.write_bytes("other", b"y")
assert not fs.rename_if_absent("other", "data/t/f.bin")
assert [s.path for s in fs.list("data/t")] == ["data/t/f.bin"]
assert fs.status("nothing") is None
assert fs.delete("_runs", recursive=True)
print("ok")
"""


def test_hadoop_root_from_a_process_without_spark(tmp_path):
    import subprocess
    import sys

    from broker.processes import ROOT

    done = subprocess.run(
        [sys.executable, "-c", _TASK_SIDE, tmp_path.as_uri()],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.stdout.strip() == "ok", done.stderr[-3000:]
    assert (tmp_path / "data" / "t" / "f.bin").stat().st_size == 3 << 20
    assert not (tmp_path / "_runs").exists()
