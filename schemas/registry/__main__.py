"""``python -m schemas.registry start CONFIG [--override key=value ...]``: replay the
store, then serve HTTP or HTTPS. ``config-docs [--properties]``: the configuration
reference. ``passwd FILE USER [--role ROLE ...]``: add or replace a user of the users file
(the password is read from stdin, never from the command line)."""

from __future__ import annotations

import argparse
import getpass
import logging
import ssl
import sys
from pathlib import Path

import uvicorn

from broker.config.definition import add_config_commands
from schemas.registry.app import create_app
from schemas.registry.auth import AuthPolicy, BasicAuthMiddleware, Users, UsersFileError, user_line
from schemas.registry.config import ConfigError, RegistryConfig
from schemas.registry.service import Registry
from schemas.store import InMemoryStore, KafkaTopicStore, SchemaStore, StoreError


def open_store(config: RegistryConfig) -> SchemaStore:
    if config.store_type == "memory":
        return InMemoryStore()
    return KafkaTopicStore(
        config.bootstrap_servers,
        config.topic,
        timeout_ms=config.timeout_ms,
        init_timeout_ms=config.init_timeout_ms,
        replication_factor=config.replication_factor,
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
    registry = Registry(store, config.compatibility_level)
    try:
        registry.load()
    except StoreError as exc:
        print(f"schema registry: cannot replay the store: {exc}", file=sys.stderr)
        store.close()
        return 1
    try:
        app = create_app(registry)
        if config.auth is not None:
            app = BasicAuthMiddleware(app, _policy(config))
        uvicorn.run(
            app,
            host=config.listener.host,
            port=config.listener.port,
            log_level="info",
            **_https(config),
        )
    except UsersFileError as exc:
        print(f"schema registry: {exc}", file=sys.stderr)
        return 2
    finally:
        store.close()
    return 0


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
