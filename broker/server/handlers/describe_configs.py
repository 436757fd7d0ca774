"""DescribeConfigs: every key of a topic (its value in force and where that comes from:
the topic's override, a dynamic or static broker key, or the default), of this broker,
or the cluster-wide dynamic broker defaults (the empty broker name), as Kafka answers
(broker/server/dynamic_config.py)."""

from __future__ import annotations

from broker.protocol.apis import DESCRIBE_CONFIGS_API
from broker.protocol.errors import ErrorCode
from broker.security.acl import Operation
from broker.server.authorization import config_refusal
from broker.server.context import BrokerContext
from broker.server.dynamic_config import (
    CONFIG_TYPES,
    PASSWORD_TYPE,
    ConfigEntry,
    ConfigRefused,
    ConfigSource,
    ResourceType,
)
from broker.server.handlers.base import ApiHandler
from broker.server.request import RequestContext


def handle(ctx: BrokerContext, request: RequestContext, body: dict) -> dict:
    configs = ctx.configs
    results = []
    for resource in body["resources"]:
        result = {
            "error_code": ErrorCode.NONE,
            "error_message": None,
            "resource_type": resource["resource_type"],
            "resource_name": resource["resource_name"],
            "configs": [],
        }
        refused = config_refusal(ctx, request, Operation.DESCRIBE_CONFIGS, resource)
        if refused:
            result["error_code"] = refused
            results.append(result)
            continue
        try:
            kind, entity = configs.resolve(
                resource["resource_type"], resource["resource_name"], ctx.metadata.topics
            )
        except ConfigRefused as exc:
            result.update(error_code=exc.code, error_message=exc.message)
            results.append(result)
            continue
        names = resource["configuration_keys"]
        if kind == ResourceType.TOPIC:
            entries = configs.describe_topic(entity, names)
        else:
            entries = configs.describe_broker(entity, names)
        result["configs"] = [
            _entry(e, body["include_synonyms"], body["include_documentation"]) for e in entries
        ]
        results.append(result)
    return {"throttle_time_ms": 0, "results": results}


def _entry(entry: ConfigEntry, synonyms: bool, documentation: bool) -> dict:
    return {
        "name": entry.key.name,
        "value": None if entry.sensitive else entry.value,
        "read_only": entry.read_only,
        "is_default": entry.source == ConfigSource.DEFAULT_CONFIG,  # v0
        "config_source": entry.source,
        "is_sensitive": entry.sensitive,
        "synonyms": [{"name": s.name, "value": s.value, "source": s.source} for s in entry.synonyms]
        if synonyms
        else [],
        "config_type": PASSWORD_TYPE if entry.sensitive else CONFIG_TYPES[entry.key.type],
        "documentation": entry.key.doc if documentation else None,
    }


def error_response(body: dict, code: ErrorCode) -> dict:
    return {
        "throttle_time_ms": 0,
        "results": [
            {
                "error_code": code,
                "error_message": None,
                "resource_type": r["resource_type"],
                "resource_name": r["resource_name"],
                "configs": [],
            }
            for r in body["resources"]
        ],
    }


HANDLER = ApiHandler(DESCRIBE_CONFIGS_API, handle, error_response)
