"""The product's servers as processes, for the tests, the benchmarks and the demo: a broker
(`python -m broker start`), the schema registry (`python -m schemas.registry start`) and a
ZooKeeper server (the one in pyspark's jars), each started as a user starts it, on a free
loopback port.

Every process writes its stdout and stderr to a log file (appended to, so a restarted
server keeps one log); `start()` returns once the server answers and raises with the end of
that log if the process exits or does not answer in time; `stop()` sends SIGTERM (the broker
flushes and checkpoints, the registry closes its store) and kills the process if it has not
exited after a timeout. Servers are context managers: `with BrokerProcess(dir) as broker:`.
"""

from __future__ import annotations

import importlib.util
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, Self

# The checkout: conf/ (the sample configurations) and dags/ are here.
ROOT = Path(__file__).resolve().parent.parent
HOST = "127.0.0.1"
_LOG_TAIL_LINES = 30


def free_port() -> int:
    """A loopback port nothing listens on now (the OS picks it)."""
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def port_answers(port: int, host: str = HOST) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


class ServerProcess:
    """One server in its own process, logging to `log_path`. Subclasses say how to run it
    (`command`) and may check more than the open port before calling it ready (`_ready`)."""

    name = "server"
    start_timeout_s = 60.0

    def __init__(self, port: int | None, log_path: Path) -> None:
        self.port = port or free_port()
        self.log_path = Path(log_path)
        self.proc: subprocess.Popen | None = None
        self._log: IO[bytes] | None = None

    def command(self) -> list[str]:
        raise NotImplementedError

    def _ready(self) -> bool:
        return port_answers(self.port)

    def start(self) -> Self:
        if self.proc is not None:
            raise RuntimeError(f"{self.name} on port {self.port} is already running")
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            self.command(),
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            # Unbuffered, so the log shows what happened up to a crash or a kill.
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        try:
            self._wait_until_ready()
        except BaseException:
            self.kill()
            raise
        return self

    def _wait_until_ready(self) -> None:
        deadline = time.monotonic() + self.start_timeout_s
        while not self._ready():
            code = self.proc.poll()
            if code is not None:
                raise RuntimeError(
                    f"{self.name} exited with code {code} before answering on port "
                    f"{self.port}{self._log_tail()}"
                )
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"{self.name} did not answer on port {self.port} within "
                    f"{self.start_timeout_s:.0f}s{self._log_tail()}"
                )
            time.sleep(0.05)

    def stop(self, timeout_s: float = 30.0) -> int:
        """SIGTERM, wait up to `timeout_s`, then SIGKILL. The exit code (0 if not running)."""
        if self.proc is None:
            return 0
        self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        self._forget()
        return code

    def kill(self) -> None:
        """SIGKILL: a crash, with no chance to flush or clean up."""
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self._forget()

    def _forget(self) -> None:
        self.proc = None
        if self._log is not None:
            self._log.close()
            self._log = None

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def _log_tail(self) -> str:
        lines = self.log_text().splitlines()[-_LOG_TAIL_LINES:]
        return f"; the end of {self.log_path}:\n" + "\n".join(lines) if lines else ""

    def __enter__(self) -> Self:
        return self if self.proc is not None else self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class BrokerProcess(ServerProcess):
    """`python -m broker start conf/server.properties`, its logs in `log_dir`, listening on
    127.0.0.1:`port`, with `overrides` as `--override key=value`."""

    name = "broker"
    start_timeout_s = 30.0

    def __init__(
        self,
        log_dir: Path,
        overrides: dict[str, str] | None = None,
        *,
        port: int | None = None,
        log_path: Path | None = None,
        config: Path = ROOT / "conf" / "server.properties",
    ) -> None:
        port = port or free_port()
        super().__init__(port, log_path or Path(log_dir).parent / f"broker-{port}.log")
        self.log_dir = Path(log_dir)
        self.config = config
        self.overrides = {
            "listeners": f"PLAINTEXT://{HOST}:{port}",
            "log.dirs": str(log_dir),
            **(overrides or {}),
        }

    @property
    def bootstrap(self) -> str:
        return f"{HOST}:{self.port}"

    def command(self) -> list[str]:
        args = [sys.executable, "-m", "broker", "start", str(self.config)]
        for key, value in self.overrides.items():
            args += ["--override", f"{key}={value}"]
        return args


class RegistryProcess(ServerProcess):
    """`python -m schemas.registry start <work>/registry-<port>.properties`. With `bootstrap`,
    schemas are kept in the `_schemas` topic of that broker; `settings` add or replace keys
    in the file (e.g. `{"kafkastore.type": "memory"}` for a registry without a broker),
    `overrides` are passed as `--override key=value`."""

    name = "schema registry"

    def __init__(
        self,
        work: Path,
        *,
        bootstrap: str | None = None,
        port: int | None = None,
        settings: dict[str, str] | None = None,
        overrides: dict[str, str] | None = None,
        log_path: Path | None = None,
    ) -> None:
        port = port or free_port()
        super().__init__(port, log_path or Path(work) / f"registry-{port}.log")
        self.overrides = dict(overrides or {})
        values = {"listeners": self.url}
        if bootstrap is not None:
            values |= {
                "kafkastore.type": "kafka",
                "kafkastore.bootstrap.servers": bootstrap,
                "kafkastore.topic": "_schemas",
            }
        values |= settings or {}
        self.config = Path(work) / f"registry-{port}.properties"
        self.config.parent.mkdir(parents=True, exist_ok=True)
        self.config.write_text("".join(f"{k}={v}\n" for k, v in values.items()))

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    def command(self) -> list[str]:
        args = [sys.executable, "-m", "schemas.registry", "start", str(self.config)]
        for key, value in self.overrides.items():
            args += ["--override", f"{key}={value}"]
        return args


def pyspark_jars() -> Path:
    """The jars shipped inside the pyspark package (ZooKeeper's server among them)."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("pyspark is not installed: its jars hold the ZooKeeper server")
    return Path(spec.submodule_search_locations[0]) / "jars"


class ZooKeeperProcess(ServerProcess):
    """A standalone ZooKeeper server, `java -cp "<pyspark>/jars/*"
    org.apache.zookeeper.server.ZooKeeperServerMain <work>/zoo.cfg`, keeping its data in
    `<work>/data` (so a restart on the same `work` keeps the znodes). Four-letter-word
    commands (except `srvr`, which ZooKeeper always keeps) and the admin HTTP server are off:
    the client port is the only one it opens. Ready once a kazoo client gets a session."""

    name = "zookeeper"

    def __init__(self, work: Path, *, port: int | None = None, log_path: Path | None = None):
        port = port or free_port()
        work = Path(work)
        super().__init__(port, log_path or work / "zookeeper.log")
        self.data_dir = work / "data"
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.config = work / "zoo.cfg"
        self.config.write_text(
            "tickTime=2000\n"
            f"dataDir={self.data_dir}\n"
            f"clientPort={port}\n"
            f"clientPortAddress={HOST}\n"
            "4lw.commands.whitelist=\n"
            "admin.enableServer=false\n"
        )

    @property
    def connect(self) -> str:
        """The connection string (`zookeeper.connect`, kazoo's `hosts`)."""
        return f"{HOST}:{self.port}"

    def command(self) -> list[str]:
        java_home = os.environ.get("JAVA_HOME")
        java = str(Path(java_home) / "bin" / "java") if java_home else "java"
        return [
            java,
            "-Xmx256m",
            # Log4j 2 without a configuration file logs errors only; INFO shows the start-up.
            "-Dorg.apache.logging.log4j.level=INFO",
            "-cp",
            f"{pyspark_jars()}/*",
            "org.apache.zookeeper.server.ZooKeeperServerMain",
            str(self.config),
        ]

    def _ready(self) -> bool:
        if not port_answers(self.port):
            return False
        from kazoo.client import KazooClient
        from kazoo.handlers.threading import KazooTimeoutError

        client = KazooClient(hosts=self.connect, timeout=5.0)
        try:
            client.start(timeout=5.0)
            client.get("/zookeeper")
            return True
        except KazooTimeoutError:
            return False
        finally:
            client.stop()
            client.close()
