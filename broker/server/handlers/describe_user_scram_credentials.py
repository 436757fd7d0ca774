"""DescribeUserScramCredentials: each user's SCRAM mechanisms and iterations, never a
secret (broker/security/user_scram.py), read from the mode's store: ZooKeeper's
/config/users in a cluster, the credentials file on a single broker."""

from __future__ import annotations

from broker.protocol.apis import DESCRIBE_USER_SCRAM_CREDENTIALS_API
from broker.protocol.errors import ErrorCode
from broker.security.user_scram import describe
from broker.server.context import BrokerContext
from broker.server.handlers.base import ApiHandler, Delayed, run_async
from broker.server.request import RequestContext


def handle(ctx: BrokerContext, request: RequestContext, body: dict) -> Delayed:
    return run_async(ctx, _describe(ctx, body))


async def _describe(ctx: BrokerContext, body: dict) -> dict:
    names = [u["name"] for u in body["users"] or []]
    stored = await ctx.admin.read_user_configs(names or None)
    return describe(body, stored)


def error_response(body: dict, code: ErrorCode) -> dict:
    return {"throttle_time_ms": 0, "error_code": code, "error_message": None, "results": []}


HANDLER = ApiHandler(DESCRIBE_USER_SCRAM_CREDENTIALS_API, handle, error_response)
