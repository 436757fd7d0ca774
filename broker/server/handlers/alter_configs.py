"""AlterConfigs: each resource's dynamic configs replaced by the given set (a null value
leaves its key out), and IncrementalAlterConfigs' shared path (incremental_alter_configs.py).

Per resource, all or nothing: the new set is checked whole through the ConfigDef
(broker/server/dynamic_config.py) before anything is stored; `validate_only` stops there.
Stored by the mode's admin (a single broker's files; ZooKeeper and a change notification
in a cluster, which every broker applies), and applied here at once."""

from __future__ import annotations

from collections.abc import Callable

from broker.protocol.apis import ALTER_CONFIGS_API
from broker.protocol.errors import ErrorCode
from broker.security.acl import Operation
from broker.server.authorization import config_refusal
from broker.server.context import BrokerContext
from broker.server.dynamic_config import ConfigRefused, DynamicConfigs, ResourceType
from broker.server.handlers.base import ApiHandler, Delayed, run_async
from broker.server.request import RequestContext

# (configs, resource, its stored overrides, its `configs` of the request) -> new overrides
NewOverrides = Callable[[DynamicConfigs, ResourceType, dict[str, str], list[dict]], dict[str, str]]


def replaced(configs, kind, current, entries: list[dict]) -> dict[str, str]:
    names = [c["name"] for c in entries]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ConfigRefused(
            ErrorCode.INVALID_REQUEST, f"Error due to duplicate config keys: {', '.join(repeated)}"
        )
    return {c["name"]: c["value"] for c in entries if c["value"] is not None}


def handle(ctx: BrokerContext, request: RequestContext, body: dict) -> Delayed:
    return run_async(ctx, alter(ctx, request, body, replaced))


async def alter(
    ctx: BrokerContext, request: RequestContext, body: dict, new_overrides: NewOverrides
) -> dict:
    configs = ctx.configs
    responses = []
    for resource in body["resources"]:
        code, message = ErrorCode.NONE, None
        refused = config_refusal(ctx, request, Operation.ALTER_CONFIGS, resource)
        try:
            if refused:
                raise ConfigRefused(refused, None)
            kind, entity = configs.resolve(
                resource["resource_type"], resource["resource_name"], ctx.metadata.topics
            )
            # What is stored, not what this broker has applied so far: another broker may
            # have changed it a moment ago (its notification still on the way).
            current = await ctx.admin.read_config(kind, entity)
            overrides = new_overrides(configs, kind, current, resource["configs"])
            configs.check(kind, entity, overrides)
            if not body["validate_only"]:
                await ctx.admin.write_config(kind, entity, overrides)
                configs.apply(kind, entity, overrides)
        except ConfigRefused as exc:
            code, message = exc.code, exc.message
        responses.append(
            {
                "error_code": code,
                "error_message": message,
                "resource_type": resource["resource_type"],
                "resource_name": resource["resource_name"],
            }
        )
    return {"throttle_time_ms": 0, "responses": responses}


def error_response(body: dict, code: ErrorCode) -> dict:
    return {
        "throttle_time_ms": 0,
        "responses": [
            {
                "error_code": code,
                "error_message": None,
                "resource_type": r["resource_type"],
                "resource_name": r["resource_name"],
            }
            for r in body["resources"]
        ],
    }


HANDLER = ApiHandler(ALTER_CONFIGS_API, handle, error_response)
