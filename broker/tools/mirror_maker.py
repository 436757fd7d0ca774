"""`mirror-maker`: Kafka's MirrorMaker (broker/mirror/), run until SIGTERM/SIGINT, and a
check of what it left behind.

    python -m broker.tools mirror-maker --consumer.config source.properties \\
        --producer.config target.properties --whitelist 'events|orders-.*' \\
        [--offset.commit.interval.ms 60000]
    python -m broker.tools mirror-maker --consumer.config ... --producer.config ... \\
        --whitelist ... --verify

The consumer file holds the source cluster's `bootstrap.servers`, the mirror's
`group.id` and any group consumer key (auto.offset.reset defaults to earliest here, so a
new mirror copies what the source already has; enable.auto.commit is always false). The
producer file holds the target's `bootstrap.servers` and producer keys (client.id,
compression.type, linger.ms, batch.size, request.timeout.ms, delivery.timeout.ms,
buffer.memory, max.block.ms); acks=all and idempotence are always on. `--verify` compares
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
from broker.config.definition import ConfigError, load_properties
from broker.mirror.mirror_maker import MIRROR_CONFIG, MirrorError, MirrorMaker
from broker.mirror.verify import compare
from broker.tools.output import Output

# Producer properties (Kafka's names) -> our Producer's keyword arguments.
PRODUCER_KEYS = {
    "client.id": ("client_id", str),
    "compression.type": ("compression", str),
    "linger.ms": ("linger_ms", float),
    "batch.size": ("batch_size", int),
    "request.timeout.ms": ("request_timeout_ms", int),
    "delivery.timeout.ms": ("delivery_timeout_ms", int),
    "buffer.memory": ("buffer_memory", int),
    "max.block.ms": ("max_block_ms", int),
}
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
        target = _required(producer_props, "bootstrap.servers", args.producer_config)
        producer_kwargs = _producer_settings(producer_props, args.producer_config)
    except (ConfigError, re.error) as exc:
        out.error(str(exc))
        return 2
    if args.verify:
        return _verify(source, target, settings["whitelist"], out)
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    consumer_settings = {
        k.replace(".", "_"): v for k, v in consumer_props.items() if k != "bootstrap.servers"
    }
    consumer_settings.setdefault("auto_offset_reset", "earliest")
    consumer_settings["enable_auto_commit"] = "false"
    try:
        consumer = GroupConsumer(source, **consumer_settings)
    except ConfigError as exc:
        out.error(f"{args.consumer_config}: {exc}")
        return 2
    producer = Producer(target, acks="all", enable_idempotence=True, **producer_kwargs)
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


def _producer_settings(props: dict, path: str) -> dict:
    kwargs = {}
    for key, value in props.items():
        if key == "bootstrap.servers":
            continue
        if key in FORCED_PRODUCER:
            if value.lower() not in FORCED_PRODUCER[key]:
                raise ConfigError(
                    f"{path}: {key}={value} is not allowed: the mirror always uses acks=all and idempotence"
                )
            continue
        if key not in PRODUCER_KEYS:
            raise ConfigError(f"{path}: unknown producer configuration {key!r} (value {value!r})")
        name, kind = PRODUCER_KEYS[key]
        try:
            kwargs[name] = kind(value)
        except ValueError:
            raise ConfigError(f"{path}: invalid value {value!r} for {key}") from None
    return kwargs


def _verify(source: str, target: str, whitelist: str, out: Output) -> int:
    from broker.client.cluster import ClusterMetadata

    with ClusterMetadata(source) as cluster:
        cluster.refresh()
        topics = sorted(t for t in cluster.topics if re.fullmatch(whitelist, t))
    rows = compare(source, target, topics)
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
