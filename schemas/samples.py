"""Realistic activity events for the demo, the tests and the benchmarks.

Deterministic for a seed, so a test can regenerate exactly what it produced. Event
time is spread over a window; the audited producer uses it as the Kafka CreateTime.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterator

# topic -> (schema name in schemas/avro, writer versions that appear on it)
SAMPLE_TOPICS: dict[str, str] = {
    "page-views": "PageViewEvent",
    "searches": "SearchEvent",
    "clicks": "ClickEvent",
}

_PAGES = ["feed", "profile", "jobs", "messaging", "notifications", "search", "company", "settings"]
_QUERIES = [
    "data engineer",
    "kafka",
    "hadoop jobs",
    "acme corp",
    "spark tuning",
    "remote",
    "avro schema",
]
_VERTICALS = ["ALL", "PEOPLE", "JOBS", "COMPANIES", "POSTS"]
_HOSTS = [f"app{n:02d}.example.com" for n in range(1, 7)]


def _header(rng: random.Random, time_ms: int, service: str) -> dict:
    return {
        "time": time_ms,
        "host": rng.choice(_HOSTS),
        "service": service,
        "event_id": str(uuid.UUID(int=rng.getrandbits(128), version=4)),
    }


def page_view(rng: random.Random, time_ms: int, version: int = 3) -> dict:
    page = rng.choice(_PAGES)
    event = {
        "header": _header(rng, time_ms, "frontend"),
        "member_id": rng.randrange(-1, 2_000_000_000)
        if version < 3
        else rng.randrange(-1, 9_000_000_000),
        "page_key": page,
        "page_url": f"https://www.example.com/{page}/{rng.randrange(10_000)}",
    }
    if version >= 2:
        event["referrer"] = rng.choice(
            [None, "https://www.example.com/feed", "https://search.example.org/"]
        )
    return event


def search(rng: random.Random, time_ms: int) -> dict:
    return {
        "header": _header(rng, time_ms, "search-frontend"),
        "member_id": rng.randrange(1, 9_000_000_000),
        "query": rng.choice(_QUERIES),
        "vertical": rng.choice(_VERTICALS),
        "result_count": rng.randrange(0, 5000),
        "page": rng.randrange(1, 5),
        "filters": {"geo": rng.choice(["us", "eu", "apac"])} if rng.random() < 0.4 else {},
    }


def click(rng: random.Random, time_ms: int) -> dict:
    return {
        "header": _header(rng, time_ms, "frontend"),
        "member_id": rng.randrange(1, 9_000_000_000),
        "page_key": rng.choice(_PAGES),
        "element_id": f"el-{rng.randrange(500)}",
        "target_url": rng.choice([None, f"https://www.example.com/item/{rng.randrange(10_000)}"]),
        "position": rng.choice([None, rng.randrange(0, 20)]),
    }


def events(
    topic: str, count: int, start_ms: int, end_ms: int, seed: int = 0, page_view_version: int = 3
) -> Iterator[dict]:
    """`count` events of `topic`'s type with event times spread evenly at random over
    [start_ms, end_ms), in time order (as a stream of live traffic would be)."""
    rng = random.Random(f"{topic}/{seed}")
    times = sorted(rng.randrange(start_ms, end_ms) for _ in range(count))
    for t in times:
        if topic == "page-views":
            yield page_view(rng, t, page_view_version)
        elif topic == "searches":
            yield search(rng, t)
        elif topic == "clicks":
            yield click(rng, t)
        else:
            raise ValueError(f"no sample events for topic {topic!r}")
