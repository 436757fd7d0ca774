"""``python -m schemas.registry start CONFIG [--override key=value ...]``: replay the
store, join the leader election (a Kafka store only: instances sharing it elect the one
that writes), then serve HTTP. ``config-docs [--properties]``: the configuration
reference."""

from __future__ import annotations

import argparse
import logging
import sys

import uvicorn

from broker.config.definition import add_config_commands
from schemas.registry.app import create_app
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
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m schemas.registry")
    commands = parser.add_subparsers(dest="command", required=True)
    add_config_commands(commands, "run the registry", "conf/registry.properties")
    args = parser.parse_args(argv)

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
        uvicorn.run(
            create_app(registry),
            host=config.listener.host,
            port=config.listener.port,
            log_level="info",
        )
    finally:
        if elector is not None:
            elector.close()
        registry.close()
        store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
