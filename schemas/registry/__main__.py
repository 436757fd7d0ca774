"""``python -m schemas.registry start CONFIG [--override key=value ...]``: replay the
store, join the leader election (a Kafka store only: instances sharing it elect the one
that writes), then serve HTTP or HTTPS. ``config-docs [--properties]``: the configuration
reference. ``passwd FILE USER [--role ROLE ...]``: add or replace a user of the users file
(the password is read from stdin, never from the command line)."""

from __future__ import annotations

import argparse
import getpass
import logging
import os
import signal
import ssl
import sys
import threading
from pathlib import Path

import uvicorn

from broker.config.definition import add_config_commands
from schemas.registry.app import create_app
from schemas.registry.auth import AuthPolicy, BasicAuthMiddleware, Users, UsersFileError, user_line
from schemas.registry.config import ConfigError, RegistryConfig
from schemas.registry.election import Identity, LeaderElector
from schemas.registry.errors import RegistryError
from schemas.registry.service import Registry
from schemas.store import InMemoryStore, KafkaTopicStore, SchemaStore


def open_store(config: RegistryConfig) -> SchemaStore:
    if config.store_type == "memory":
        return InMemoryStore()
    return KafkaTopicStore(
        config.bootstrap_servers,
        config.topic,
        timeout_ms=config.timeout_ms,
        init_timeout_ms=config.init_timeout_ms,
        replication_factor=config.replication_factor,
        security=config.store_security,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m schemas.registry")
    commands = parser.add_subparsers(dest="command", required=True)
    add_config_commands(commands, "run the registry", "conf/registry.properties")
    passwd = commands.add_parser("passwd", help="add or replace a user of the users file")
    passwd.add_argument("file", type=Path)
    passwd.add_argument("user")
    passwd.add_argument("--role", action="append", default=[], help="a role (repeatable)")
    args = parser.parse_args(argv)

    if args.command == "passwd":
        return _passwd(args.file, args.user, args.role)

    if args.command == "config-docs":
        from schemas.registry.config import REGISTRY_CONFIG, SAMPLE_HEADER, SAMPLE_SETTINGS

        if args.properties:
            print(REGISTRY_CONFIG.to_properties(SAMPLE_SETTINGS, SAMPLE_HEADER), end="")
        else:
            print(REGISTRY_CONFIG.to_markdown(), end="")
        return 0

    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    try:
        config = RegistryConfig.from_file(args.config, args.override)
    except ConfigError as exc:
        print(f"schema registry: bad config {args.config}: {exc}", file=sys.stderr)
        return 2
    store = open_store(config)
    elector = None
    if config.store_type == "kafka":
        identity = Identity(
            config.advertised_host,
            config.listener.port,
            config.inter_instance_protocol,
            config.leader_eligibility,
        )
        registry = Registry(
            store, config.compatibility_level, timeout_ms=config.timeout_ms, identity=identity
        )
        elector = LeaderElector(
            registry,
            identity,
            config.bootstrap_servers,
            config.group_id,
            session_timeout_ms=config.session_timeout_ms,
            request_timeout_ms=config.timeout_ms,
            security=config.store_security,
        )
    else:  # a memory store is this process's alone: it leads by itself
        registry = Registry(store, config.compatibility_level, timeout_ms=config.timeout_ms)
    try:
        registry.load(config.init_timeout_ms)
    except RegistryError as exc:
        print(f"schema registry: cannot replay the store: {exc.message}", file=sys.stderr)
        store.close()
        return 1
    registry.start_tailing()
    if elector is not None:
        # Serve once the group has decided who leads, so a client's first write after
        # the start does not meet "unknown leader" (as Confluent's registry starts).
        elector.start()
        if not elector.wait_for_election(config.init_timeout_ms):
            logging.warning("no leader elected yet: serving reads; writes fail until one is")
    try:
        app = create_app(registry, _forward_tls(config))
        if config.auth is not None:
            app = BasicAuthMiddleware(app, _policy(config))
        # uvicorn shuts down gracefully on SIGTERM, then raises the signal again under the
        # handler it found: with the default one the process dies there, before the
        # `finally` below, so the instance never left the group (the others, and its own
        # restart, waited out its session timeout) nor closed its store.
        signal.signal(signal.SIGTERM, _terminated)
        uvicorn.run(
            app,
            host=config.listener.host,
            port=config.listener.port,
            log_level="info",
            timeout_graceful_shutdown=config.shutdown_graceful_ms / 1000,
            **_https(config),
        )
    except UsersFileError as exc:
        print(f"schema registry: {exc}", file=sys.stderr)
        return 2
    except _Terminated:
        logging.info("SIGTERM: leaving the group and closing the store")
        # The clean-up talks to the brokers; a stop must not hang on one that is gone.
        watchdog = threading.Timer(config.timeout_ms / 1000, _clean_up_overdue)
        watchdog.daemon = True
        watchdog.start()
    finally:
        if elector is not None:
            elector.close()
        registry.close()
        store.close()
    return 0


class _Terminated(Exception):
    """SIGTERM, once uvicorn has stopped serving: the clean-up in `main` runs."""


def _terminated(signum, frame) -> None:
    raise _Terminated


def _clean_up_overdue() -> None:
    logging.warning("clean-up after SIGTERM not done within kafkastore.timeout.ms: exiting")
    os._exit(1)


def _policy(config: RegistryConfig) -> AuthPolicy:
    auth = config.auth
    return AuthPolicy(
        Users(auth.users_file), auth.realm, frozenset(auth.roles), frozenset(auth.readonly_roles)
    )


_CLIENT_AUTH = {
    "NONE": ssl.CERT_NONE,
    "REQUESTED": ssl.CERT_OPTIONAL,
    "REQUIRED": ssl.CERT_REQUIRED,
}


def _https(config: RegistryConfig) -> dict:
    """uvicorn's TLS arguments; its context keeps Python's floor of TLS 1.2."""
    tls = config.tls
    if tls is None:
        return {}
    return {
        "ssl_certfile": tls.keystore,
        "ssl_keyfile": tls.keystore,
        "ssl_keyfile_password": tls.key_password,
        "ssl_ca_certs": tls.truststore,
        "ssl_cert_reqs": _CLIENT_AUTH[tls.client_auth],
    }


def _forward_tls(config: RegistryConfig) -> ssl.SSLContext | None:
    """The leader's certificate is checked against the trust store, else the system's CAs."""
    if config.inter_instance_protocol != "https":
        return None
    truststore = config.tls.truststore if config.tls is not None else None
    return ssl.create_default_context(cafile=truststore)


def _passwd(path: Path, user: str, roles: list[str]) -> int:
    password = getpass.getpass(f"password for {user}: ") if sys.stdin.isatty() else ""
    if not sys.stdin.isatty():
        password = sys.stdin.readline().rstrip("\n")
    if not password:
        print("passwd: an empty password is not accepted", file=sys.stderr)
        return 2
    try:
        line = user_line(user, password, roles)
    except ValueError as exc:
        print(f"passwd: {exc}", file=sys.stderr)
        return 2
    lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    kept = [raw for raw in lines if raw.split("#", 1)[0].partition(":")[0].strip() != user]
    path.write_text("\n".join([*kept, line]) + "\n", encoding="utf-8")
    path.chmod(0o600)
    print(f"{'replaced' if len(kept) < len(lines) else 'added'} user {user} in {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
