"""Which API versions the broker advertises in ApiVersions and which it accepts.

The two differ on purpose (docs/contracts/wire-protocol.md): librdkafka enables features
only when our advertised range overlaps its probes, so Produce is advertised from v0 although
v0-v2 (old message formats) are answered with UNSUPPORTED_VERSION. An API is listed
only once it works end to end.
"""

from __future__ import annotations

from typing import NamedTuple

from broker.protocol.apis import (
    API_VERSIONS,
    CREATE_TOPICS,
    DELETE_TOPICS,
    FETCH,
    INIT_PRODUCER_ID,
    LIST_OFFSETS,
    METADATA,
    PRODUCE,
)


class Supported(NamedTuple):
    advertised: tuple[int, int]
    accepted: tuple[int, int]


SUPPORTED: dict[int, Supported] = {
    PRODUCE: Supported((0, 8), (3, 8)),
    FETCH: Supported((4, 11), (4, 11)),
    LIST_OFFSETS: Supported((1, 5), (1, 5)),
    METADATA: Supported((0, 8), (0, 8)),
    API_VERSIONS: Supported((0, 3), (0, 3)),
    CREATE_TOPICS: Supported((2, 4), (2, 4)),
    DELETE_TOPICS: Supported((1, 3), (1, 3)),
    INIT_PRODUCER_ID: Supported((0, 1), (0, 1)),
}


def advertised_ranges() -> dict[int, tuple[int, int]]:
    return {key: s.advertised for key, s in sorted(SUPPORTED.items())}


def is_accepted(api_key: int, version: int) -> bool:
    s = SUPPORTED.get(api_key)
    return s is not None and s.accepted[0] <= version <= s.accepted[1]


def is_decodable(api_key: int, version: int) -> bool:
    """Inside the advertised range: the request can be decoded and answered with an error."""
    s = SUPPORTED.get(api_key)
    return s is not None and s.advertised[0] <= version <= s.advertised[1]
