"""`python -m broker start CONFIG [--override key=value ...]` and friends."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys

from broker.config.definition import ConfigError, add_config_commands


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m broker", description="A Kafka-protocol broker")
    sub = parser.add_subparsers(dest="command", required=True)
    add_config_commands(sub, "run a broker until SIGTERM/SIGINT", "conf/server.properties")
    args = parser.parse_args(argv)

    if args.command == "config-docs":
        from broker.config.server import SAMPLE_HEADER, SAMPLE_SETTINGS, SERVER_CONFIG
        from broker.server.topic_config import TOPIC_CONFIG

        if args.properties:
            print(SERVER_CONFIG.to_properties(SAMPLE_SETTINGS, SAMPLE_HEADER), end="")
            return 0
        print(SERVER_CONFIG.to_markdown())
        print(TOPIC_CONFIG.to_markdown())
        return 0

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
    from broker.controller.membership import BrokerIdInUse, ClusterIdMismatch
    from broker.server.meta import LogDirMismatch

    try:
        asyncio.run(Broker(config).run_until_signalled())
    except (BrokerIdInUse, ClusterIdMismatch, LogDirMismatch, TimeoutError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
