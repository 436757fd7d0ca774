"""A slow disk for the fault campaign: a passthrough FUSE filesystem (libfuse 3 through
`mfusepy`) that shows a backing directory at a mount point and sleeps before each write,
fsync (and, if asked, read) for as long as a control file says, read again while mounted
so a nemesis can slow the disk down and bring it back without remounting.

    python -m tests.faults.slow_disk BACKING MOUNTPOINT CONTROL

runs in the foreground until unmounted (`fusermount3 -u MOUNTPOINT`). It runs as a process
of its own so that the sleeps never hold the test's own threads. The control file holds
`key=ms` words, e.g. `write=200 fsync=800 read=0` (missing keys and a missing file: 0),
and optionally `eio=write,fsync`: those calls then fail with EIO (a failing disk, the
`failing-disk-*` nemesis) instead of sleeping; `set_delay` writes it.

A broker's log dir `<work>/broker-<id>` is mounted this way by `SlowDisk` with its data in
`<work>/broker-<id>.backing` and its control file `<work>/broker-<id>.slow`
(`control_file`): the nemesis finds the control file from the broker's log dir alone.
"""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

KEYS = ("write", "fsync", "read")
# How long a read control file is trusted: re-reading it on every call would double the
# filesystem calls; a tenth of a second is well below any fault's length.
CONTROL_TTL_S = 0.1


def control_file(log_dir: Path) -> Path:
    return log_dir.with_name(log_dir.name + ".slow")


def set_delay(
    control: Path, *, write_ms: int = 0, fsync_ms: int = 0, read_ms: int = 0, eio=()
) -> None:
    tmp = control.with_name(control.name + ".tmp")
    failing = f" eio={','.join(eio)}" if eio else ""
    tmp.write_text(f"write={write_ms} fsync={fsync_ms} read={read_ms}{failing}\n")
    os.replace(tmp, control)  # the filesystem never reads half a file


def parse_control(text: str) -> dict[str, float]:
    """Seconds to sleep per operation kind from `key=ms` words; unknown words are ignored."""
    delays = dict.fromkeys(KEYS, 0.0)
    for word in text.split():
        key, _, value = word.partition("=")
        if key in delays and value.strip().isdigit():
            delays[key] = int(value) / 1000.0
    return delays


def parse_failures(text: str) -> frozenset[str]:
    """The operation kinds an `eio=kind,kind` word makes fail; unknown kinds are ignored."""
    for word in text.split():
        key, _, value = word.partition("=")
        if key == "eio":
            return frozenset(kind for kind in value.split(",") if kind in KEYS)
    return frozenset()


def unavailable() -> str | None:
    """Why a slow disk cannot be mounted here (None: it can)."""
    if os.geteuid() != 0:
        return "mounting a FUSE filesystem over a log dir needs root"
    if not os.path.exists("/dev/fuse"):
        return "no /dev/fuse (FUSE not available in this kernel/container)"
    try:
        import mfusepy  # noqa: F401 - fails without libfuse
    except (ImportError, OSError) as exc:
        return f"no FUSE library ({exc}; `apt-get install fuse3`)"
    if shutil.which("fusermount3") is None and shutil.which("umount") is None:
        return "neither fusermount3 nor umount to unmount with"
    return None


class SlowDisk:
    """`mountpoint` shown from `backing` by a `python -m tests.faults.slow_disk` process,
    delays 0 until `set_delay(control, ...)`. `mount()` returns once the mount is there;
    `unmount()` undoes it (lazily, as a broker may still hold files open)."""

    def __init__(self, backing: Path, mountpoint: Path, control: Path | None = None) -> None:
        self.backing, self.mountpoint = Path(backing), Path(mountpoint)
        self.control = control or control_file(self.mountpoint)
        self.proc: subprocess.Popen | None = None

    def mount(self, timeout_s: float = 10.0) -> SlowDisk:
        self.backing.mkdir(parents=True, exist_ok=True)
        self.mountpoint.mkdir(parents=True, exist_ok=True)
        set_delay(self.control)
        log = open(self.mountpoint.with_name(self.mountpoint.name + ".fuse.log"), "ab")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.faults.slow_disk",
             str(self.backing), str(self.mountpoint), str(self.control)],
            stdout=log, stderr=subprocess.STDOUT, cwd=Path(__file__).resolve().parents[2],
        )  # fmt: skip
        log.close()
        deadline = time.monotonic() + timeout_s
        while not os.path.ismount(self.mountpoint):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.unmount()
                raise RuntimeError(f"slow disk at {self.mountpoint} did not mount")
            time.sleep(0.05)
        return self

    def unmount(self) -> None:
        set_delay(self.control)  # let whatever still writes finish quickly
        if os.path.ismount(self.mountpoint):
            if shutil.which("fusermount3"):
                subprocess.run(["fusermount3", "-u", "-z", str(self.mountpoint)], check=False)
            else:
                subprocess.run(["umount", "-l", str(self.mountpoint)], check=False)
        if self.proc is not None:
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self.proc = None

    def __enter__(self) -> SlowDisk:
        return self.mount()

    def __exit__(self, *exc) -> None:
        self.unmount()


def make_operations(backing: str, control: str):
    """The passthrough: every call goes to the same path under `backing` (file handles are
    the backing file descriptors); writes, fsyncs and reads first sleep what `control` says."""
    import mfusepy as fuse

    class Passthrough(fuse.Operations):
        use_ns = True

        def __init__(self) -> None:
            self.root = os.path.realpath(backing)
            self._delays = dict.fromkeys(KEYS, 0.0)
            self._failing: frozenset[str] = frozenset()
            self._read_at = 0.0
            self._lock = threading.Lock()

        # -- the fault -------------------------------------------------------------------
        def _sleep(self, kind: str) -> None:
            now = time.monotonic()
            if now - self._read_at > CONTROL_TTL_S:
                with self._lock:
                    try:
                        text = Path(control).read_text()
                    except OSError:
                        text = ""
                    self._delays, self._failing = parse_control(text), parse_failures(text)
                    self._read_at = now
            if kind in self._failing:  # a failing disk: the call never reaches it
                raise fuse.FuseOSError(errno.EIO)
            if self._delays[kind] > 0:
                time.sleep(self._delays[kind])

        def _full(self, path: str) -> str:
            return os.path.join(self.root, path.lstrip("/"))

        # -- files -----------------------------------------------------------------------
        def getattr(self, path, fh=None):
            st = os.fstat(fh) if fh is not None else os.lstat(self._full(path))
            keys = ("st_mode", "st_nlink", "st_uid", "st_gid", "st_size", "st_ino",
                    "st_atime_ns", "st_mtime_ns", "st_ctime_ns", "st_blocks", "st_blksize")  # fmt: skip
            out = {k: getattr(st, k) for k in keys}
            for k in ("st_atime", "st_mtime", "st_ctime"):
                out[k] = out.pop(k + "_ns")
            return out

        def access(self, path, amode):
            if not os.access(self._full(path), amode):
                raise fuse.FuseOSError(errno.EACCES)
            return 0

        def open(self, path, flags):
            return os.open(self._full(path), flags)

        def create(self, path, mode, flags=os.O_WRONLY | os.O_TRUNC):
            # The caller's flags: a file created O_RDWR is read back (mmap'd indexes).
            return os.open(self._full(path), flags | os.O_CREAT, mode)

        def read(self, path, size, offset, fh):
            self._sleep("read")
            return os.pread(fh, size, offset)

        def write(self, path, data, offset, fh):
            self._sleep("write")
            return os.pwrite(fh, data, offset)

        def truncate(self, path, length, fh=None):
            os.truncate(self._full(path), length)
            return 0

        def fallocate(self, path, mode, offset, size, fh):
            if mode != 0:
                raise fuse.FuseOSError(errno.EOPNOTSUPP)
            os.posix_fallocate(fh, offset, size)
            return 0

        def flush(self, path, fh):
            return 0

        def fsync(self, path, datasync, fh):
            self._sleep("fsync")
            (os.fdatasync if datasync else os.fsync)(fh)
            return 0

        def release(self, path, fh):
            os.close(fh)
            return 0

        def unlink(self, path):
            os.unlink(self._full(path))
            return 0

        def rename(self, old, new):
            os.rename(self._full(old), self._full(new))
            return 0

        def link(self, target, source):
            os.link(self._full(source), self._full(target))
            return 0

        def symlink(self, target, source):
            os.symlink(source, self._full(target))
            return 0

        def readlink(self, path):
            return os.readlink(self._full(path))

        def chmod(self, path, mode):
            os.chmod(self._full(path), mode)
            return 0

        def chown(self, path, uid, gid):
            os.chown(self._full(path), uid, gid)
            return 0

        def utimens(self, path, times=None):
            os.utime(self._full(path), ns=times)
            return 0

        def statfs(self, path):
            sv = os.statvfs(self._full(path))
            keys = ("f_bavail", "f_bfree", "f_blocks", "f_bsize", "f_favail", "f_ffree",
                    "f_files", "f_flag", "f_frsize", "f_namemax")  # fmt: skip
            return {k: getattr(sv, k) for k in keys}

        # -- directories -----------------------------------------------------------------
        def mkdir(self, path, mode):
            os.mkdir(self._full(path), mode)
            return 0

        def rmdir(self, path):
            os.rmdir(self._full(path))
            return 0

        def readdir(self, path, fh):
            return [".", "..", *os.listdir(self._full(path))]

        def fsyncdir(self, path, datasync, fh):
            self._sleep("fsync")
            fd = os.open(self._full(path), os.O_RDONLY | os.O_DIRECTORY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
            return 0

    return Passthrough()


def main(argv: list[str]) -> None:
    if len(argv) != 3:
        sys.exit("usage: python -m tests.faults.slow_disk BACKING MOUNTPOINT CONTROL")
    import mfusepy as fuse

    backing, mountpoint, control = argv
    # Threads: a request sleeping in a slow fsync must not hold the others (a real slow
    # disk queues per request too); default_permissions: root's tests, kernel checks.
    fuse.FUSE(
        make_operations(backing, control), mountpoint,
        foreground=True, nothreads=False, default_permissions=True,
    )  # fmt: skip


if __name__ == "__main__":
    main(sys.argv[1:])
