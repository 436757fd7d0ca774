"""The cost of authorization per request: our broker's request handling in process
(`tests/helpers/inprocess_broker.py`: request bytes through the dispatcher, the real
handlers and logs, no socket), Produce of one small record and Metadata of one topic,
from a principal that an ACL allows. Three brokers in the same run:

- no authorizer (`authorizer.class.name` empty: today's broker, the baseline);
- the authorizer with the principal's few ACLs only;
- the authorizer with 10,000 ACLs loaded (other principals' literal ACLs on 4,000 topics
  and 2,000 groups, 2,000 prefixed ACLs of 200 prefix lengths, wildcard ACLs), the
  principal's among them.

Rounds alternate between the brokers so a busy machine slows all alike; the fastest round
of each counts. Prints requests per second and the ratios to the baseline; then the
authorizer's decisions alone (`Authorizer.authorize`) per second with 10,000 ACLs against
with none.

    .venv/bin/python -m bench.bench_acls [--acls 10000] [--requests 5000] [--rounds 5]

Results: docs/benchmarks.md, "Broker: the cost of ACLs".
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from bench.common import report
from broker.protocol.apis import METADATA, PRODUCE
from broker.security.acl import (
    AccessControlEntry,
    Operation,
    PatternType,
    Permission,
    ResourcePattern,
    ResourceType,
)
from broker.security.authorizer import Authorizer
from tests.helpers.acls import AUTHORIZER_SETTINGS, as_principal, create_acls, creation
from tests.helpers.inprocess_broker import InProcessBroker, Respond
from tests.helpers.server_requests import create, produce_body, values

PRINCIPAL = "User:app"


def filler(count: int):
    """`count` ACLs of other principals, spread as a large cluster's are."""
    made = []
    for i in range(count):
        kind = i % 5
        principal = f"User:team-{i % 97}"
        op = (Operation.READ, Operation.WRITE, Operation.DESCRIBE)[i % 3]
        if kind in (0, 1):
            pattern = ResourcePattern(ResourceType.TOPIC, f"topic-{i}")
        elif kind == 2:
            pattern = ResourcePattern(ResourceType.GROUP, f"group-{i}")
        elif kind == 3:
            # prefixes of many lengths: the probe per length is what prefixed ACLs cost
            pattern = ResourcePattern(
                ResourceType.TOPIC, f"p{i % 200:03d}-" + "x" * (i % 200), PatternType.PREFIXED
            )
        else:
            pattern = ResourcePattern(ResourceType.TOPIC, f"topic-{i}", PatternType.LITERAL)
            principal = "User:*" if i % 50 == 0 else principal
        made.append((pattern, AccessControlEntry(principal, "*", op, Permission.ALLOW)))
    return made


def broker(work: Path, name: str, acls: int | None) -> InProcessBroker:
    settings = AUTHORIZER_SETTINGS if acls is not None else {}
    b = InProcessBroker(work / name, **settings)
    with as_principal(b, "User:admin"):
        create(b, "events")
    if acls is not None:
        own = [
            creation(PRINCIPAL, Operation.WRITE, ResourceType.TOPIC, "events"),
            creation(PRINCIPAL, Operation.DESCRIBE, ResourceType.TOPIC, "ev",
                     pattern=PatternType.PREFIXED),
        ]  # fmt: skip
        assert all(r["error_code"] == 0 for r in create_acls(b, *own))
        for pattern, entry in filler(max(0, acls - len(own))):
            # straight into the cache: 10,000 CreateAcls would rewrite the file each time
            entries = b.state.authorizer.entries(pattern) | {entry}
            b.state.authorizer.set_entries(pattern, entries)
        assert len(b.state.authorizer.bindings()) == max(acls, len(own))
    return b


def rate(b: InProcessBroker, frames: list[bytes]) -> float:
    with as_principal(b, PRINCIPAL):
        start = time.perf_counter()
        for frame in frames:
            outcome = b.outcome(frame)
            assert isinstance(outcome, Respond), outcome
        return len(frames) / (time.perf_counter() - start)


def decisions_rate(authorizer: Authorizer, names: list[str]) -> float:
    start = time.perf_counter()
    for name in names:
        authorizer.authorize(PRINCIPAL, "127.0.0.1", Operation.WRITE, ResourceType.TOPIC, name)
    return len(names) / (time.perf_counter() - start)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--acls", type=int, default=10_000)
    parser.add_argument("--requests", type=int, default=5_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-acls-") as work:
        brokers = {
            "none": broker(Path(work), "none", None),
            "few": broker(Path(work), "few", 0),
            "many": broker(Path(work), "many", args.acls),
        }
        requests = {
            "produce": lambda b: b.frame(PRODUCE, 8, produce_body("events", values(b"v"), acks=1)),
            "metadata": lambda b: b.frame(METADATA, 9, {
                "topics": [{"name": "events"}], "allow_auto_topic_creation": False,
                "include_cluster_authorized_operations": False,
                "include_topic_authorized_operations": False}),
        }  # fmt: skip
        for what, make in requests.items():
            best = dict.fromkeys(brokers, 0.0)
            for round_ in range(args.rounds):
                order = list(brokers.items())
                for name, b in order[round_ % 3 :] + order[: round_ % 3]:
                    frames = [make(b) for _ in range(args.requests)]
                    best[name] = max(best[name], rate(b, frames))
            report(f"{what}, authorizer with its own ACLs only", best["few"], best["none"],
                   "req/s", "no authorizer")  # fmt: skip
            report(f"{what}, authorizer with {args.acls:,} ACLs", best["many"], best["none"],
                   "req/s", "no authorizer")  # fmt: skip
        names = [f"events-{i % 100}" for i in range(200_000)]
        empty, loaded = Authorizer(), brokers["many"].state.authorizer
        best_empty = best_loaded = 0.0
        for _ in range(args.rounds):
            best_empty = max(best_empty, decisions_rate(empty, names))
            best_loaded = max(best_loaded, decisions_rate(loaded, names))
        report(f"authorize() with {args.acls:,} ACLs", best_loaded, best_empty,
               "decisions/s", "with none")  # fmt: skip
        for b in brokers.values():
            b.close()


if __name__ == "__main__":
    main()
