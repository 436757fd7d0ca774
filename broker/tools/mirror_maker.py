"""`mirror-maker`: Kafka's MirrorMaker (broker/mirror/), run until SIGTERM/SIGINT, and a
check of what it left behind.

    python -m broker.tools mirror-maker --consumer.config source.properties \\
        --producer.config target.properties --whitelist 'events|orders-.*' \\
        [--offset.commit.interval.ms 60000]
    python -m broker.tools mirror-maker --consumer.config ... --producer.config ... \\
        --whitelist ... --verify

The consumer file holds the source cluster's `bootstrap.servers`, the mirror's
`group.id` and any group consumer key (auto.offset.reset defaults to earliest here, so a
new mirror copies what the source already has; enable.auto.commit is always false and
isolation.level always read_committed: only committed records are copied). The
producer file holds the target's `bootstrap.servers` and producer keys (PRODUCER_CONFIG,
broker/client/producer_config.py); acks=all and idempotence are always on. `--verify` compares
the whitelisted topics of both clusters record by record: missing records (exit code 1)
and duplicates (what at-least-once allows after a restart).
"""

from __future__ import annotations

import argparse
import logging
import re
import signal
import threading

from broker.client.group import GroupConsumer
from broker.client.producer import Producer
from broker.client.producer_config import producer_kwargs
from broker.client.security import split_security
from broker.config.definition import ConfigError, load_properties
from broker.mirror.mirror_maker import MIRROR_CONFIG, MirrorError, MirrorMaker
from broker.mirror.verify import compare
from broker.tools.output import Output

FORCED_PRODUCER = {"acks": {"all", "-1"}, "enable.idempotence": {"true"}}


def main(
    argv: list[str] | None = None, output: Output | None = None, stop: threading.Event | None = None
) -> int:
    parser = argparse.ArgumentParser(
        prog="kafka-mirror-maker", description="Mirror topics from one cluster to another."
    )
    parser.add_argument(
        "--consumer.config",
        dest="consumer_config",
        required=True,
        help="source cluster consumer properties",
    )
    parser.add_argument(
        "--producer.config",
        dest="producer_config",
        required=True,
        help="target cluster producer properties",
    )
    parser.add_argument(
        "--whitelist",
        "--include",
        dest="whitelist",
        required=True,
        help="regular expression of topics to mirror",
    )
    parser.add_argument(
        "--offset.commit.interval.ms",
        dest="commit_interval",
        default=None,
        help="offset commit interval (ms)",
    )
    parser.add_argument(
        "--abort.on.send.failure", dest="abort", default=None, help="only true is supported"
    )
    parser.add_argument(
        "--verify", action="store_true", help="compare the topics of both clusters and exit"
    )
    args = parser.parse_args(argv)
    out = output or Output()
    try:
        settings = MIRROR_CONFIG.parse(
            {
                "whitelist": args.whitelist,
                **(
                    {"offset.commit.interval.ms": args.commit_interval}
                    if args.commit_interval
                    else {}
                ),
                **({"abort.on.send.failure": args.abort} if args.abort else {}),
            }
        )
        if not settings["abort.on.send.failure"]:
            raise ConfigError(
                "abort.on.send.failure=false is not supported: a mirror that skips records loses them"
            )
        re.compile(settings["whitelist"])
        consumer_props = load_properties(args.consumer_config)
        producer_props = load_properties(args.producer_config)
        source = _required(consumer_props, "bootstrap.servers", args.consumer_config)
        _required(producer_props, "bootstrap.servers", args.producer_config)
        target, producer_settings = _producer_settings(producer_props, args.producer_config)
        try:
            source_security, consumer_props = split_security(consumer_props)
        except ConfigError as exc:
            raise ConfigError(f"{args.consumer_config}: {exc}") from None
        level = consumer_props.get("isolation.level", "read_committed").strip()
        if level != "read_committed":
            raise ConfigError(
                f"{args.consumer_config}: isolation.level={level} is not allowed: the mirror "
                "copies committed records only (read_committed)"
            )
    except (ConfigError, re.error) as exc:
        out.error(str(exc))
        return 2
    if args.verify:
        securities = (source_security, producer_settings["security"])
        return _verify(source, target, settings["whitelist"], out, securities)
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    consumer_settings = {
        k.replace(".", "_"): v for k, v in consumer_props.items() if k != "bootstrap.servers"
    }
    consumer_settings.setdefault("auto_offset_reset", "earliest")
    consumer_settings["enable_auto_commit"] = "false"
    consumer_settings["isolation_level"] = "read_committed"
    try:
        consumer = GroupConsumer(source, source_security, **consumer_settings)
    except ConfigError as exc:
        out.error(f"{args.consumer_config}: {exc}")
        return 2
    producer = Producer(target, **producer_settings)
    stop = stop or _stop_on_signals()
    mirror = MirrorMaker(
        consumer, producer, settings["whitelist"], settings["offset.commit.interval.ms"]
    )
    try:
        mirror.run(stop)
    except MirrorError as exc:
        out.error(str(exc))
        return 1
    finally:
        producer.close()
    out.line(f"Mirrored {mirror.mirrored} records.")
    return 0


def _required(props: dict, key: str, path: str) -> str:
    if not props.get(key):
        raise ConfigError(f"Missing required configuration {key} in {path}")
    return props[key]


def _producer_settings(props: dict, path: str) -> tuple[list[str], dict]:
    """The target's servers and Producer keywords from the producer file (PRODUCER_CONFIG's
    keys), acks=all and idempotence forced: a file asking for less is refused."""
    for key, allowed in FORCED_PRODUCER.items():
        if key in props and props[key].strip().lower() not in allowed:
            raise ConfigError(
                f"{path}: {key}={props[key]} is not allowed: the mirror always uses acks=all "
                "and idempotence"
            )
    try:
        servers, settings = producer_kwargs(props)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    settings.update(acks="all", enable_idempotence=True)
    return servers, settings


def _verify(source: str, target: str, whitelist: str, out: Output, securities: tuple) -> int:
    """`securities`: the source's and the target's SecurityConfig."""
    from broker.client.cluster import ClusterMetadata

    with ClusterMetadata(source, security=securities[0]) as cluster:
        cluster.refresh()
        topics = sorted(t for t in cluster.topics if re.fullmatch(whitelist, t))
    rows = compare(source, target, topics, *securities)
    out.table(
        ["TOPIC", "SOURCE-RECORDS", "TARGET-RECORDS", "MISSING", "DUPLICATES", "UNKNOWN"],
        [list(r) for r in rows],
        [20, 15, 15, 8, 11],
    )
    for r in rows:
        if r.missing:
            out.error(f"{r.topic}: {r.missing} source records are missing at the target")
    return 1 if out.failed else 0


def _stop_on_signals() -> threading.Event:
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    return stop
