"""The product's servers as processes, for the tests, the benchmarks, the demo and
`python -m broker cluster`: a broker (`python -m broker start`), the schema registry
(`python -m schemas.registry start`), a ZooKeeper server (the one in pyspark's jars), each
started as a user starts it, on a free loopback port; and a `Cluster` of ZooKeeper and N
brokers.

Every process writes its stdout and stderr to a log file (appended to, so a restarted
server keeps one log); `start()` returns once the server answers and raises with the end of
that log if the process exits or does not answer in time; `stop()` sends SIGTERM (the broker
flushes and checkpoints, the registry closes its store) and kills the process if it has not
exited after a timeout. Servers are context managers: `with BrokerProcess(dir) as broker:`.

A server runs on a `Host`: the address it binds and is reached at, and a command prefix that
puts its process there (`ip netns exec <namespace>` for the network-partition tests; nothing,
by default, for this machine's loopback).
"""

from __future__ import annotations

import importlib.util
import logging
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
import warnings
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Self

if TYPE_CHECKING:
    from kazoo.client import KazooClient

    from broker.cluster import BrokerRegistration

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


@dataclass(frozen=True)
class Host:
    """Where a server runs: the address it binds (and clients reach it at), and the command
    prefix that puts its process there, e.g. `("ip", "netns", "exec", "<namespace>")`."""

    address: str = HOST
    command_prefix: tuple[str, ...] = ()


LOCALHOST = Host()


class ServerProcess:
    """One server in its own process on `host`, logging to `log_path`. Subclasses say how to
    run it (`command`) and may check more than the open port before calling it ready
    (`_ready`)."""

    name = "server"
    start_timeout_s = 60.0

    def __init__(self, port: int | None, log_path: Path, host: Host = LOCALHOST) -> None:
        self.port = port or free_port()
        self.log_path = Path(log_path)
        self.host = host
        self.proc: subprocess.Popen | None = None
        self._log: IO[bytes] | None = None

    @property
    def address(self) -> str:
        """`host:port`, where clients reach the server."""
        return f"{self.host.address}:{self.port}"

    def command(self) -> list[str]:
        raise NotImplementedError

    def _ready(self) -> bool:
        return port_answers(self.port, self.host.address)

    def start(self) -> Self:
        """Start the process and return once the server answers."""
        self.spawn()
        self.wait_until_ready()
        return self

    def spawn(self) -> Self:
        """Start the process without waiting for it (`wait_until_ready` does): a cluster
        starts its brokers side by side."""
        if self.proc is not None:
            raise RuntimeError(f"{self.name} on {self.address} is already running")
        if port_answers(self.port, self.host.address):
            # Otherwise readiness would be judged on whatever already listens there.
            raise RuntimeError(f"{self.name}: something already listens on {self.address}")
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [*self.host.command_prefix, *self.command()],
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            # Unbuffered, so the log shows what happened up to a crash or a kill.
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            # A session of its own: a Ctrl-C at the terminal reaches only the parent, which
            # stops its servers itself, in order (a cluster's brokers before its ZooKeeper).
            start_new_session=True,
        )
        return self

    def wait_until_ready(self) -> None:
        """Return once the server answers; kill it and raise (with the end of its log) if
        it exits first or does not answer within `start_timeout_s`."""
        try:
            self._wait_until_ready()
        except BaseException:
            self.kill()
            raise

    def _wait_until_ready(self) -> None:
        deadline = time.monotonic() + self.start_timeout_s
        while not self._ready():
            code = self.proc.poll()
            if code is not None:
                raise RuntimeError(
                    f"{self.name} exited with code {code} before answering on "
                    f"{self.address}{self._log_tail()}"
                )
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"{self.name} did not answer on {self.address} within "
                    f"{self.start_timeout_s:.0f}s{self._log_tail()}"
                )
            time.sleep(0.05)

    def exit_code(self) -> int | None:
        """The exit code of a process that ended on its own; None while it runs (or when it
        was not started, or was stopped through `stop`/`kill`)."""
        return None if self.proc is None else self.proc.poll()

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
    `host`:`port` (127.0.0.1 by default), with `overrides` as `--override key=value`."""

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
        host: Host = LOCALHOST,
    ) -> None:
        port = port or free_port()
        super().__init__(port, log_path or Path(log_dir).parent / f"broker-{port}.log", host)
        self.log_dir = Path(log_dir)
        self.config = config
        self.overrides = {
            "listeners": f"PLAINTEXT://{host.address}:{port}",
            "log.dirs": str(log_dir),
            **(overrides or {}),
        }

    @property
    def bootstrap(self) -> str:
        return self.address

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
        # A keystore means the registry serves HTTPS on its port.
        self.scheme = "https" if (settings or {}).get("ssl.keystore.location") else "http"
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
        return f"{self.scheme}://{HOST}:{self.port}"

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
    the client port is the only one it opens. Ready once a kazoo client gets a session.
    Session timeouts are bounded by 2 and 20 ticks: a shorter `tick_ms` allows shorter
    sessions (failure-detection tests)."""

    name = "zookeeper"

    def __init__(
        self,
        work: Path,
        *,
        port: int | None = None,
        log_path: Path | None = None,
        host: Host = LOCALHOST,
        tick_ms: int = 2000,
    ):
        port = port or free_port()
        work = Path(work)
        super().__init__(port, log_path or work / "zookeeper.log", host)
        self.data_dir = work / "data"
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.config = work / "zoo.cfg"
        self.config.write_text(
            f"tickTime={tick_ms}\n"
            f"dataDir={self.data_dir}\n"
            f"clientPort={port}\n"
            f"clientPortAddress={host.address}\n"
            "4lw.commands.whitelist=\n"
            "admin.enableServer=false\n"
        )

    @property
    def connect(self) -> str:
        """The connection string (`zookeeper.connect`, kazoo's `hosts`)."""
        return self.address

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
        if not port_answers(self.port, self.host.address):
            return False
        from kazoo.handlers.threading import KazooTimeoutError

        try:
            # Short: a connection accepted just before the server is up can go unanswered,
            # and the next probe gets through sooner than the wait for this one would.
            with kazoo_session(self.connect, timeout_s=1.0) as client:
                client.get("/zookeeper")
            return True
        except KazooTimeoutError:
            return False


# kazoo warns of every refused connection; the launchers' probes expect those while a server
# starts, and report a server that never answers themselves.
_KAZOO_LOG = logging.getLogger(__name__ + ".kazoo")
_KAZOO_LOG.setLevel(logging.ERROR)


@contextmanager
def kazoo_session(hosts: str, timeout_s: float = 10.0) -> Iterator[KazooClient]:
    """A kazoo client connected to `hosts` (a connect string, chroot included), closed after
    the block. For the launchers' own checks; the broker's client is broker.zk.client."""
    from kazoo.client import KazooClient

    client = KazooClient(hosts=hosts, timeout=timeout_s, logger=_KAZOO_LOG)
    try:
        with warnings.catch_warnings():
            # A chroot that no broker has created yet simply reads as empty here.
            warnings.filterwarnings("ignore", "No chroot path exists", UserWarning)
            client.start(timeout=timeout_s)
        yield client
    finally:
        client.stop()
        client.close()


class Cluster:
    """ZooKeeper and brokers with `broker.id` 0..N-1 (or the ids given), as processes: each
    broker has `zookeeper.connect` with the cluster's chroot, its log dir
    `<work>/broker-<id>`, its process log `<work>/logs/broker-<id>.log`, optionally its
    `broker.rack` and the `hosts` entry it runs on; `overrides` go to every broker and
    `broker_overrides[id]` to one (they win over the cluster's own keys).

    ZooKeeper: by default the cluster runs its own (data under `<work>/zookeeper`, chroot
    `/kafka-hourly`, the same on every run so a restarted cluster finds its metadata); given
    a `ZooKeeperProcess`, it starts it if it is not running (and then stops it with the
    brokers); given a connect string (a server someone else runs), it only uses it. A given
    server gets a chroot of this cluster's own (`/cluster-<random>`) unless `chroot` says
    otherwise (`chroot=""`: none).

    `start()` starts ZooKeeper, then every broker side by side, and returns once all answer
    (and, with `wait_for_registration`, are registered in ZooKeeper and know the cluster:
    each one's Metadata names the controller and every running broker). `stop()` sends SIGTERM
    to the brokers one by one, the controller last, then stops ZooKeeper.
    """

    # start() and restart() wait for /brokers/ids/<id> and for the controller's metadata to
    # reach the brokers as well as the open port, so a started cluster is one the
    # controller knows and whose brokers know it.
    wait_for_registration = True
    registration_timeout_s = 30.0

    def __init__(
        self,
        work: Path,
        brokers: int | Iterable[int] = 3,
        *,
        zookeeper: ZooKeeperProcess | str | None = None,
        chroot: str | None = None,
        zookeeper_port: int | None = None,
        base_port: int | None = None,
        racks: Sequence[str] | Mapping[int, str] | None = None,
        overrides: Mapping[str, str] | None = None,
        broker_overrides: Mapping[int, Mapping[str, str]] | None = None,
        hosts: Mapping[int, Host] | None = None,
        config: Path = ROOT / "conf" / "server.properties",
    ) -> None:
        self.work = Path(work)
        self.logs = self.work / "logs"
        ids = list(range(brokers)) if isinstance(brokers, int) else list(brokers)
        if not ids or len(set(ids)) != len(ids) or min(ids) < 0:
            raise ValueError(f"broker ids must be distinct and >= 0, at least one: {ids}")
        if isinstance(racks, Mapping):
            self.racks = dict(racks)
        else:
            racks = list(racks or [])
            if racks and len(racks) != len(ids):
                raise ValueError(f"{len(racks)} racks for {len(ids)} brokers: give one each")
            self.racks = dict(zip(ids, racks, strict=False))
        self.overrides = dict(overrides or {})
        self.broker_overrides = {i: dict(o) for i, o in (broker_overrides or {}).items()}
        self.hosts = dict(hosts or {})
        self.config = config
        if isinstance(zookeeper, str):
            self.zookeeper, zk_connect = None, zookeeper
        else:
            self.zookeeper = zookeeper or ZooKeeperProcess(
                self.work / "zookeeper", port=zookeeper_port, log_path=self.logs / "zookeeper.log"
            )
            zk_connect = self.zookeeper.connect
        if chroot is None:
            chroot = "/kafka-hourly" if zookeeper is None else f"/cluster-{uuid.uuid4().hex[:8]}"
        self.chroot = "/" + chroot.strip("/") if chroot.strip("/") else ""
        self.zookeeper_connect = zk_connect + self.chroot
        self._owns_zookeeper = False
        self._brokers = {
            broker_id: self._broker_process(
                broker_id, base_port + index if base_port is not None else None
            )
            for index, broker_id in enumerate(ids)
        }

    def _broker_process(self, broker_id: int, port: int | None) -> BrokerProcess:
        values = {"broker.id": str(broker_id), "zookeeper.connect": self.zookeeper_connect}
        if self.racks.get(broker_id) is not None:
            values["broker.rack"] = self.racks[broker_id]
        values |= self.overrides | self.broker_overrides.get(broker_id, {})
        return BrokerProcess(
            self.work / f"broker-{broker_id}",
            values,
            port=port,
            log_path=self.logs / f"broker-{broker_id}.log",
            config=self.config,
            host=self.hosts.get(broker_id, LOCALHOST),
        )

    @property
    def ids(self) -> list[int]:
        return list(self._brokers)

    @property
    def brokers(self) -> list[BrokerProcess]:
        return list(self._brokers.values())

    def broker(self, broker_id: int) -> BrokerProcess:
        try:
            return self._brokers[broker_id]
        except KeyError:
            raise KeyError(f"no broker {broker_id} in this cluster (ids {self.ids})") from None

    @property
    def bootstrap(self) -> str:
        """Every broker's address, comma-separated (`bootstrap.servers`)."""
        return ",".join(b.bootstrap for b in self._brokers.values())

    def start(self) -> Self:
        if self.zookeeper is not None and self.zookeeper.proc is None:
            self.zookeeper.start()
            self._owns_zookeeper = True
        try:
            for b in self._brokers.values():
                b.spawn()
            for b in self._brokers.values():
                b.wait_until_ready()
            if self.wait_for_registration:
                self.wait_registered()
                self.wait_for_metadata()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self, timeout_s: float = 30.0) -> dict[int, int]:
        """SIGTERM to each running broker in turn (waiting up to `timeout_s` for each, then
        SIGKILL), the controller last so leadership moves once; then ZooKeeper, if this
        cluster started it. The brokers' exit codes."""
        running = [i for i, b in self._brokers.items() if b.proc is not None]
        controller = self.controller() if running else None
        order = sorted(running, key=lambda i: i == controller)
        codes = {i: self._brokers[i].stop(timeout_s) for i in order}
        if self._owns_zookeeper:
            self.zookeeper.stop()
            self._owns_zookeeper = False
        return codes

    def kill(self, broker_id: int) -> None:
        """SIGKILL one broker: a crash (its ZooKeeper session lives on until it expires)."""
        self.broker(broker_id).kill()

    def restart(self, broker_id: int, *, port: int | None = None) -> BrokerProcess:
        """Stop the broker if it runs (SIGTERM) and start it again: same id, same log dir and
        log, same port unless `port` says otherwise."""
        broker = self.broker(broker_id)
        broker.stop()
        if port is not None and port != broker.port:
            broker = self._brokers[broker_id] = self._broker_process(broker_id, port)
        previous = self.registrations() if self.wait_for_registration else {}
        broker.start()
        if self.wait_for_registration:
            old = previous.get(broker_id)
            self.wait_registered([broker_id], newer_than={broker_id: old.epoch} if old else None)
            self.wait_for_metadata([broker_id])
        return broker

    # -- ZooKeeper's view ------------------------------------------------------------------

    def registrations(self) -> dict[int, BrokerRegistration]:
        """The brokers registered under this cluster's chroot (`/brokers/ids`), each with
        its registration's creation zxid as `epoch`."""
        from broker.client.zk_consumer.zk_group import read_registrations

        with kazoo_session(self.zookeeper_connect) as client:
            return read_registrations(client)

    def controller(self) -> int | None:
        """The broker id in `/controller`; None without one (or without ZooKeeper)."""
        from kazoo.exceptions import NoNodeError
        from kazoo.handlers.threading import KazooTimeoutError

        from broker.zk.layout import CONTROLLER, ZkDataError, decode_controller

        try:
            with kazoo_session(self.zookeeper_connect, timeout_s=2.0) as client:
                return decode_controller(client.get(CONTROLLER)[0])
        except (NoNodeError, KazooTimeoutError, ZkDataError):
            return None

    def wait_registered(
        self,
        ids: Iterable[int] | None = None,
        *,
        newer_than: Mapping[int, int] | None = None,
        timeout_s: float | None = None,
    ) -> dict[int, BrokerRegistration]:
        """Wait until every broker of `ids` (default: those running) is registered in
        ZooKeeper, by a registration created after zxid `newer_than[id]` where given (a
        restarted broker's, not the one its killed predecessor left until its session
        expired). The registrations read; TimeoutError naming the missing ids otherwise."""
        wanted = set(self.ids if ids is None else ids)
        if ids is None:
            wanted = {i for i in wanted if self._brokers[i].proc is not None}
        newer_than = dict(newer_than or {})
        timeout_s = self.registration_timeout_s if timeout_s is None else timeout_s
        deadline = time.monotonic() + timeout_s
        from broker.client.zk_consumer.zk_group import read_registrations

        with kazoo_session(self.zookeeper_connect) as client:
            while True:
                found = read_registrations(client)
                missing = sorted(
                    i for i in wanted if i not in found or found[i].epoch <= newer_than.get(i, -1)
                )
                if not missing:
                    return found
                if time.monotonic() > deadline:
                    logs = ", ".join(str(self.broker(i).log_path) for i in missing)
                    raise TimeoutError(
                        f"brokers {missing} not registered in {self.zookeeper_connect} within "
                        f"{timeout_s:.0f}s (logs: {logs})"
                    )
                time.sleep(0.1)

    def wait_for_metadata(self, ids: Iterable[int] | None = None, timeout_s: float | None = None):
        """Wait until each broker of `ids` (default: every running one) answers Metadata with
        a controller and every running broker: the controller's first UpdateMetadata has
        reached it. Before that a broker knows neither, and clients that ask it then (an
        admin client looking for the controller) may wait a long while before asking again."""
        from broker.client.cluster import ClusterMetadata
        from broker.protocol.errors import KafkaError

        running = {i for i, b in self._brokers.items() if b.proc is not None}
        wanted = running if ids is None else set(ids)
        timeout_s = self.registration_timeout_s if timeout_s is None else timeout_s
        deadline = time.monotonic() + timeout_s
        for broker_id in sorted(wanted):
            while True:
                try:
                    with ClusterMetadata(self.broker(broker_id).bootstrap, timeout_s=5) as meta:
                        meta.refresh([])
                        if meta.controller_id >= 0 and set(meta.brokers) >= running:
                            break
                except (KafkaError, OSError):
                    pass
                if time.monotonic() > deadline:
                    raise TimeoutError(
                        f"broker {broker_id} has no cluster metadata after {timeout_s:.0f}s "
                        f"(log: {self.broker(broker_id).log_path})"
                    )
                time.sleep(0.05)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
