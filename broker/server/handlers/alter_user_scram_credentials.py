"""AlterUserScramCredentials: upsert and delete users' SCRAM credentials. The request
carries salted passwords; the server keeps Kafka's stored form (salt, stored and server
keys, iterations). Checked whole per user (broker/security/user_scram.py: a user with a
refused item keeps what it had), then each changed user's entry is written where every
broker's authenticator reads it: ZooKeeper's /config/users/<user> and a change
notification in a cluster, the credentials file on a single broker."""

from __future__ import annotations

from broker.protocol.apis import ALTER_USER_SCRAM_CREDENTIALS_API
from broker.protocol.errors import ErrorCode
from broker.security.user_scram import altered_users, plan_alterations
from broker.server.context import BrokerContext
from broker.server.handlers.base import ApiHandler, Delayed, run_async
from broker.server.request import RequestContext


def handle(ctx: BrokerContext, request: RequestContext, body: dict) -> Delayed:
    return run_async(ctx, _alter(ctx, body))


async def _alter(ctx: BrokerContext, body: dict) -> dict:
    users = altered_users(body)
    plan = plan_alterations(body, await ctx.admin.read_user_configs(users))
    for user, config in plan.new_configs.items():
        await ctx.admin.write_user_config(user, config)
    return plan.response(users)


def error_response(body: dict, code: ErrorCode) -> dict:
    return {
        "throttle_time_ms": 0,
        "results": [
            {"user": user, "error_code": code, "error_message": None}
            for user in altered_users(body)
        ],
    }


HANDLER = ApiHandler(ALTER_USER_SCRAM_CREDENTIALS_API, handle, error_response)
