"""A small command line over the client library.

    python -m broker.client.cli -b 127.0.0.1:9092 topics --list
    python -m broker.client.cli -b broker1:9093 --command-config client.properties topics --list
    python -m broker.client.cli topics --create NAME --partitions 3
    python -m broker.client.cli topics --describe [NAME]
    python -m broker.client.cli topics --delete NAME
    python -m broker.client.cli produce TOPIC [--key-separator :] [--compression gzip] < lines
    python -m broker.client.cli consume TOPIC --partition 0 --offset earliest|latest|N --count N
    python -m broker.client.cli config-docs

`produce` sends one record per stdin line (without its newline); with
--key-separator the text before the first separator is the key. `consume` prints one
value per line (`offset<TAB>key<TAB>value` with --verbose) and stops after --count
records, or at the end of the log when --count is not given. `config-docs` prints the
client's settings (the group consumer's, the producer's and the security table) for
docs/configuration.md. `--command-config` is a properties file of security settings
(broker/client/security.py) for every command.
"""

from __future__ import annotations

import argparse
import sys

from broker.client.admin import AdminClient, NewTopic
from broker.client.producer import Producer
from broker.client.security import command_security
from broker.client.simple_consumer import SimpleConsumer
from broker.protocol.errors import KafkaError


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    args.security = command_security(parser, args.command_config)
    try:
        return args.run(args)
    except KafkaError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m broker.client.cli", description=__doc__)
    parser.add_argument("-b", "--bootstrap-server", default="127.0.0.1:9092")
    parser.add_argument(
        "--command-config", metavar="FILE", help="security properties (security.protocol, ...)"
    )
    sub = parser.add_subparsers(required=True)

    topics = sub.add_parser("topics", help="create, delete, list or describe topics")
    action = topics.add_mutually_exclusive_group(required=True)
    action.add_argument("--list", action="store_true")
    action.add_argument("--create", metavar="NAME")
    action.add_argument("--delete", metavar="NAME")
    action.add_argument("--describe", metavar="NAME", nargs="?", const="")
    topics.add_argument("--partitions", type=int, default=1)
    topics.add_argument("--replication-factor", type=int, default=1)
    topics.add_argument("--config", action="append", default=[], metavar="KEY=VALUE")
    topics.set_defaults(run=_topics)

    produce = sub.add_parser("produce", help="send stdin lines as records")
    produce.add_argument("topic")
    produce.add_argument("--partition", type=int)
    produce.add_argument("--key-separator")
    produce.add_argument("--compression", default="none")
    produce.add_argument("--acks", default="all")
    produce.set_defaults(run=_produce)

    consume = sub.add_parser("consume", help="print records of one partition")
    consume.add_argument("topic")
    consume.add_argument("--partition", type=int, default=0)
    consume.add_argument("--offset", default="earliest", help="earliest, latest or a number")
    consume.add_argument("--count", type=int, help="stop after this many records")
    consume.add_argument("--verbose", action="store_true", help="print offset and key too")
    consume.set_defaults(run=_consume)

    docs = sub.add_parser("config-docs", help="print the client's configuration reference")
    docs.set_defaults(run=_config_docs)
    return parser


def _config_docs(args) -> int:
    from broker.client.group.config import CONSUMER_CONFIG
    from broker.client.producer_config import PRODUCER_CONFIG
    from broker.client.security import SECURITY_CONFIG

    print(CONSUMER_CONFIG.to_markdown())
    print(PRODUCER_CONFIG.to_markdown())
    print(SECURITY_CONFIG.to_markdown())
    return 0


def _topics(args) -> int:
    with AdminClient(args.bootstrap_server, security=args.security) as admin:
        if args.list:
            for name in admin.list_topics():
                print(name)
        elif args.create:
            configs = dict(item.split("=", 1) for item in args.config)
            topic = NewTopic(args.create, args.partitions, args.replication_factor, configs)
            admin.create_topics([topic], raise_errors=True)
            print(f"created {args.create}")
        elif args.delete:
            admin.delete_topics([args.delete], raise_errors=True)
            print(f"deleted {args.delete}")
        else:
            names = [args.describe] if args.describe else None
            for name, desc in admin.describe_topics(names).items():
                print(f"{name}\tpartitions={len(desc.partitions)}")
                for p in desc.partitions:
                    print(f"\t{p.partition}\tleader={p.leader}\treplicas={p.replicas}\tisr={p.isr}")
    return 0


def _produce(args) -> int:
    sep = args.key_separator.encode() if args.key_separator else None
    futures = []
    with Producer(
        args.bootstrap_server, acks=args.acks, compression=args.compression, security=args.security
    ) as producer:
        for line in sys.stdin.buffer:
            value = line.rstrip(b"\r\n")
            key = None
            if sep is not None and sep in value:
                key, value = value.split(sep, 1)
            futures.append(producer.send(args.topic, value, key=key, partition=args.partition))
        producer.flush()
    failed = [f.exception() for f in futures if f.exception() is not None]
    for exc in failed[:5]:
        print(f"error: {exc}", file=sys.stderr)
    print(f"produced {len(futures) - len(failed)} records", file=sys.stderr)
    return 1 if failed else 0


def _consume(args) -> int:
    out = sys.stdout.buffer
    with SimpleConsumer(args.bootstrap_server, security=args.security) as consumer:
        topic, partition = args.topic, args.partition
        if args.offset == "earliest":
            offset = consumer.earliest_offset(topic, partition)
        elif args.offset == "latest":
            offset = consumer.latest_offset(topic, partition)
        else:
            offset = int(args.offset)
        left = args.count
        while left is None or left > 0:
            # With a count, wait for records to arrive; without one, stop at the end.
            wait = 1000 if left is not None else 0
            result = consumer.fetch(topic, partition, offset, max_wait_ms=wait, min_bytes=1)
            for record in result.records():
                if args.verbose:
                    key = record.key if record.key is not None else b""
                    out.write(b"%d\t%s\t" % (record.offset, key))
                out.write(record.value if record.value is not None else b"")
                out.write(b"\n")
                if left is not None:
                    left -= 1
                    if left == 0:
                        break
            out.flush()
            offset = result.next_offset
            if left is None and offset >= result.high_watermark:
                break
    return 0


if __name__ == "__main__":
    sys.exit(main())
