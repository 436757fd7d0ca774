"""ApiVersions: the version range of every API this broker serves.

A version we do not speak is answered by the dispatcher before decoding (a v0 body with
UNSUPPORTED_VERSION and these ranges, so the client can retry lower).

From v3 the answer also lists the features (KIP-584): the levels this broker supports,
and the level in force, which clients read to pick a protocol (a Kafka 4 producer uses
transaction version 2 when `transaction.version` is finalized at 2 or more;
docs/contracts/transactions.md).
"""

from __future__ import annotations

from broker.protocol.apis import API_VERSIONS_API
from broker.protocol.errors import ErrorCode
from broker.server.context import BrokerContext
from broker.server.handlers.base import ApiHandler
from broker.server.request import RequestContext


def api_keys() -> list[dict]:
    # Imported here: the package builds its handler table by importing this module.
    from broker.server.handlers import advertised_ranges

    return [
        {"api_key": k, "min_version": lo, "max_version": hi}
        for k, (lo, hi) in advertised_ranges().items()
    ]


# feature -> (lowest, highest supported level, the broker config key of its finalized level)
FEATURES = {"transaction.version": (0, 2, "transaction.version")}
# The levels come from static configuration, so they never change while a client is
# connected: one epoch (clients ignore finalized levels of an epoch not newer than the
# last they saw; ours is never below -1, "none").
FINALIZED_EPOCH = 0


def handle(ctx: BrokerContext, request: RequestContext, body: dict) -> dict:
    return {
        "error_code": ErrorCode.NONE,
        "api_keys": api_keys(),
        "throttle_time_ms": 0,
        "supported_features": [
            {"name": name, "min_version": lo, "max_version": hi}
            for name, (lo, hi, _) in FEATURES.items()
        ],
        "finalized_features_epoch": FINALIZED_EPOCH,
        "finalized_features": [
            {"name": name, "max_version_level": level, "min_version_level": level}
            for name, (_, _, key) in FEATURES.items()
            if (level := ctx.config[key]) > 0
        ],
    }


def error_response(body: dict, code: ErrorCode) -> dict:
    return {"error_code": code, "api_keys": api_keys(), "throttle_time_ms": 0}


HANDLER = ApiHandler(API_VERSIONS_API, handle, error_response)
