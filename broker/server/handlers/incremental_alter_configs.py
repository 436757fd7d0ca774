"""IncrementalAlterConfigs: SET, DELETE, APPEND and SUBTRACT (the last two on list keys
such as cleanup.policy) on each resource's dynamic configs; otherwise as AlterConfigs
(alter_configs.py): checked whole, all or nothing per resource, `validate_only`."""

from __future__ import annotations

from broker.config.server import SERVER_CONFIG
from broker.protocol.apis import INCREMENTAL_ALTER_CONFIGS_API
from broker.server.context import BrokerContext
from broker.server.dynamic_config import ResourceType, incremental
from broker.server.handlers.alter_configs import alter, error_response
from broker.server.handlers.base import ApiHandler, Delayed, run_async
from broker.server.request import RequestContext
from broker.server.topic_config import TOPIC_CONFIG


def operated(configs, kind, current, entries: list[dict]) -> dict[str, str]:
    definition = TOPIC_CONFIG if kind == ResourceType.TOPIC else SERVER_CONFIG
    operations = [(c["name"], c["config_operation"], c["value"]) for c in entries]
    return incremental(current, operations, definition, lambda name: configs.inherited(kind, name))


def handle(ctx: BrokerContext, request: RequestContext, body: dict) -> Delayed:
    return run_async(ctx, alter(ctx, request, body, operated))


HANDLER = ApiHandler(INCREMENTAL_ALTER_CONFIGS_API, handle, error_response)
