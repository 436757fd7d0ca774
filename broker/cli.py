"""`python -m broker start CONFIG [--override key=value ...]`, `python -m broker cluster
start|stop` and `python -m broker config-docs`."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
import time
from pathlib import Path

from broker.config.definition import ConfigError, add_config_commands


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m broker", description="A Kafka-protocol broker")
    sub = parser.add_subparsers(dest="command", required=True)
    add_config_commands(sub, "run a broker until SIGTERM/SIGINT", "conf/server.properties")
    _add_cluster_commands(sub)
    args = parser.parse_args(argv)

    if args.command == "config-docs":
        from broker.client.zk_consumer.config import ZK_CONSUMER_CONFIG
        from broker.config.server import SAMPLE_HEADER, SAMPLE_SETTINGS, SERVER_CONFIG
        from broker.mirror.mirror_maker import MIRROR_CONFIG
        from broker.server.topic_config import TOPIC_CONFIG

        if args.properties:
            print(SERVER_CONFIG.to_properties(SAMPLE_SETTINGS, SAMPLE_HEADER), end="")
            return 0
        print(SERVER_CONFIG.to_markdown())
        print(TOPIC_CONFIG.to_markdown())
        print(ZK_CONSUMER_CONFIG.to_markdown())
        print(MIRROR_CONFIG.to_markdown())
        return 0
    if args.command == "cluster":
        return run_cluster(args) if args.action == "start" else stop_cluster(args)

    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    from broker.config.server import BrokerConfig
    from broker.server.broker import Broker

    try:
        config = BrokerConfig.from_file(args.config, args.override)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    from broker.server.meta import LogDirMismatch
    from broker.server.modes.membership import BrokerIdInUse, ClusterIdMismatch

    try:
        asyncio.run(Broker(config).run_until_signalled())
    except ConfigError as exc:  # found at start: a key store, a JAAS config, credentials
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except (BrokerIdInUse, ClusterIdMismatch, LogDirMismatch, TimeoutError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


# -- cluster -------------------------------------------------------------------------------

PID_FILE = "cluster.pid"


def _add_cluster_commands(sub: argparse._SubParsersAction) -> None:
    cluster = sub.add_parser(
        "cluster", help="run ZooKeeper and N brokers on this machine (development, demos)"
    )
    actions = cluster.add_subparsers(dest="action", required=True)
    start = actions.add_parser(
        "start",
        help="start ZooKeeper and the brokers; run in the foreground until Ctrl-C/SIGTERM",
    )
    start.add_argument("--brokers", type=int, default=3, help="how many brokers (ids 0..N-1)")
    start.add_argument(
        "--dir",
        default="var/cluster",
        help="work directory: ZooKeeper's data, one log dir per broker, logs/ (kept across runs)",
    )
    start.add_argument(
        "--base-port", type=int, default=9092, help="broker N listens on base-port + N"
    )
    start.add_argument("--zookeeper-port", type=int, default=2181)
    start.add_argument("--rack", help="comma-separated broker.rack of each broker, e.g. r1,r2,r3")
    start.add_argument(
        "--override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a broker configuration key for every broker (repeatable)",
    )
    start.add_argument(
        "--config", default="conf/server.properties", help="the brokers' properties file"
    )
    stop = actions.add_parser("stop", help="stop a cluster started in the background from --dir")
    stop.add_argument("--dir", default="var/cluster")
    stop.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for it")


def run_cluster(args: argparse.Namespace) -> int:
    """The cluster in the foreground: start, say where everything is, report a server that
    exits on its own, and stop in order (brokers, then ZooKeeper) on SIGINT or SIGTERM."""
    from broker.processes import Cluster

    work = Path(args.dir).resolve()
    pid_file = work / PID_FILE
    running = _cluster_pid(pid_file)
    if running is not None:
        print(
            f"error: a cluster is already running from {args.dir} (pid {running})", file=sys.stderr
        )
        return 1
    racks = args.rack.split(",") if args.rack else None
    overrides = {}
    for item in args.override:
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            print(f"error: malformed override {item!r}: expected key=value", file=sys.stderr)
            return 2
        overrides[key.strip()] = value.strip()
    try:
        cluster = Cluster(
            work,
            args.brokers,
            zookeeper_port=args.zookeeper_port,
            base_port=args.base_port,
            racks=racks,
            overrides=overrides,
            config=Path(args.config).resolve(),
        )
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    # SIGINT too: a shell starts background commands with SIGINT ignored.
    signal.signal(signal.SIGINT, interrupt)
    signal.signal(signal.SIGTERM, interrupt)
    pid_file.write_text(f"{os.getpid()}\n")
    code = 0
    try:
        print(f"starting ZooKeeper and {args.brokers} brokers under {args.dir} ...", flush=True)
        try:
            cluster.start()
        except (RuntimeError, TimeoutError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            code = 1
            return code
        _print_cluster(cluster, args.dir)
        _watch(cluster)
    except KeyboardInterrupt:
        pass
    finally:
        # A second Ctrl-C must not cut the orderly stop short.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        if code == 0:
            print("stopping: brokers (SIGTERM), then ZooKeeper ...", flush=True)
        codes = cluster.stop()
        pid_file.unlink(missing_ok=True)
        if code == 0:
            exits = ", ".join(f"broker {i}: {c}" for i, c in codes.items())
            print(f"stopped ({exits or 'no broker was running'})", flush=True)
    return code


def _print_cluster(cluster, shown_dir: str) -> None:
    print(f"zookeeper   {cluster.zookeeper.connect}   (log {shown_dir}/logs/zookeeper.log)")
    for i in cluster.ids:
        rack = cluster.racks.get(i)
        print(
            f"broker {i}    {cluster.broker(i).bootstrap}"
            + (f"   rack {rack}" if rack else "")
            + f"   (log {shown_dir}/logs/broker-{i}.log, data {shown_dir}/broker-{i})"
        )
    print(f"bootstrap.servers={cluster.bootstrap}")
    print(f"zookeeper.connect={cluster.zookeeper_connect}")
    print(f"Ctrl-C, or `python -m broker cluster stop --dir {shown_dir}`, stops it.", flush=True)


def _watch(cluster) -> None:
    """Until interrupted: say once when a server exits on its own (the others keep running)."""
    servers = {f"broker {i}": cluster.broker(i) for i in cluster.ids}
    servers["zookeeper"] = cluster.zookeeper
    reported: set[str] = set()
    while True:
        time.sleep(0.5)
        for name, server in servers.items():
            code = server.exit_code()
            if code is not None and name not in reported:
                reported.add(name)
                print(f"{name} exited with code {code}; see {server.log_path}", flush=True)


def stop_cluster(args: argparse.Namespace) -> int:
    """SIGTERM to the foreground process of `cluster start --dir`, which stops the servers in
    order; wait for it to finish."""
    pid_file = Path(args.dir).resolve() / PID_FILE
    pid = _cluster_pid(pid_file)
    if pid is None:
        print(f"no cluster running from {args.dir}", file=sys.stderr)
        return 1
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + args.timeout
    while _alive(pid):
        if time.monotonic() > deadline:
            print(f"error: pid {pid} still runs after {args.timeout:.0f}s", file=sys.stderr)
            return 1
        time.sleep(0.2)
    print(f"stopped the cluster of {args.dir} (pid {pid})")
    return 0


def _cluster_pid(pid_file: Path) -> int | None:
    """The pid in `pid_file` if it is a running `cluster start`; a stale file is removed."""
    try:
        pid = int(pid_file.read_text().strip())
    except (FileNotFoundError, ValueError):
        return None
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        cmdline = []
    if b"cluster" in cmdline and b"start" in cmdline:
        return pid
    pid_file.unlink(missing_ok=True)  # left by a run that was killed; the pid is not ours
    return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (a child of ours, not yet reaped) counts as gone.
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


if __name__ == "__main__":
    sys.exit(main())
