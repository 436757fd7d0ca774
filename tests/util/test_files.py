"""broker.util.files: the one durable-replace of a small file, and the fsync primitives the
log is written with."""

from __future__ import annotations

import errno
import os

import pytest

from broker.util import files
from broker.util.files import fsync_dir, write_all, write_atomically


def test_write_atomically_creates_replaces_and_leaves_no_temp(tmp_path):
    path = tmp_path / "meta.properties"
    write_atomically(path, "version=0\ncluster.id=é\n")
    assert path.read_bytes() == "version=0\ncluster.id=é\n".encode()
    write_atomically(path, b"\x00\x01")
    assert path.read_bytes() == b"\x00\x01"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["meta.properties"]


def test_write_atomically_uses_the_temp_name_given(tmp_path, monkeypatch):
    renamed = []
    real_replace = os.replace
    monkeypatch.setattr(os, "replace", lambda a, b: (renamed.append((a, b)), real_replace(a, b)))
    write_atomically(tmp_path / "f", b"x", temp=tmp_path / ".f.1234.tmp")
    assert renamed == [(tmp_path / ".f.1234.tmp", tmp_path / "f")]
    assert (tmp_path / "f").read_bytes() == b"x"


def test_data_then_rename_then_directory_are_made_durable_in_that_order(tmp_path, monkeypatch):
    """A crash between any two steps leaves the old file or the whole new one."""
    events = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd):
        events.append(("fsync", os.path.realpath(f"/proc/self/fd/{fd}")))
        real_fsync(fd)

    def replace(src, dst):
        events.append(("replace", str(dst)))
        real_replace(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    path = tmp_path / "recovery-point-offset-checkpoint"
    write_atomically(path, b"0\n0\n")
    assert events == [
        ("fsync", str(tmp_path / "recovery-point-offset-checkpoint.tmp")),
        ("replace", str(path)),
        ("fsync", str(tmp_path)),
    ]


def test_a_failed_write_keeps_the_old_file_and_removes_the_temp(tmp_path):
    path = tmp_path / "topic-configs.json"
    write_atomically(path, b"{}")
    with pytest.raises(TypeError):
        write_atomically(path, object())  # not bytes: fails after the temp file is created
    assert path.read_bytes() == b"{}"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["topic-configs.json"]


def test_a_failed_rename_keeps_the_old_file_and_removes_the_temp(tmp_path):
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "child").write_bytes(b"")
    with pytest.raises(OSError):
        write_atomically(tmp_path / "taken", b"x")  # a non-empty directory is in the way
    assert sorted(p.name for p in tmp_path.iterdir()) == ["taken"]


def test_fsync_dir_raises_io_errors_but_not_a_filesystem_that_cannot_sync_dirs(
    tmp_path, monkeypatch
):
    fsync_dir(tmp_path)

    def failing(code):
        def fsync(fd):
            raise OSError(code, os.strerror(code))

        return fsync

    monkeypatch.setattr(files.os, "fsync", failing(errno.EINVAL))
    fsync_dir(tmp_path)
    monkeypatch.setattr(files.os, "fsync", failing(errno.EIO))
    with pytest.raises(OSError) as raised:
        fsync_dir(tmp_path)
    assert raised.value.errno == errno.EIO


def test_fsync_dir_refuses_what_is_not_a_directory(tmp_path):
    (tmp_path / "plain").write_bytes(b"")
    with pytest.raises(NotADirectoryError):
        fsync_dir(tmp_path / "plain")
    with pytest.raises(FileNotFoundError):
        fsync_dir(tmp_path / "missing")


def test_write_all_finishes_short_writes(tmp_path, monkeypatch):
    real_write = os.write
    calls = []

    def short_write(fd, data):
        calls.append(len(data))
        return real_write(fd, bytes(data[:3]))

    monkeypatch.setattr(files.os, "write", short_write)
    path = tmp_path / "segment"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT)
    try:
        write_all(fd, bytearray(b"0123456789"))
    finally:
        os.close(fd)
    assert path.read_bytes() == b"0123456789"
    assert calls == [10, 7, 4, 1]
