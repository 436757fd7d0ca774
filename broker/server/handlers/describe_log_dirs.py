"""DescribeLogDirs: this broker's log directories and, in each, the partitions it holds
with their size in bytes and their offset lag (as Kafka: how far the log end is behind
the high watermark, never negative), plus the directory's total and usable bytes (v4).
Clients send it to every broker they want to know about; `topics` null means all."""

from __future__ import annotations

import shutil

from broker.protocol.apis import DESCRIBE_LOG_DIRS_API
from broker.protocol.errors import ErrorCode
from broker.server.context import BrokerContext
from broker.server.handlers.base import ApiHandler
from broker.server.request import RequestContext


def handle(ctx: BrokerContext, request: RequestContext, body: dict) -> dict:
    asked = (
        None
        if body["topics"] is None
        else {(t["topic"], p) for t in body["topics"] for p in t["partitions"]}
    )
    replicas = ctx.replicas
    per_dir: dict[str, dict[str, list[dict]]] = {
        str(d.resolve()): {} for d in replicas.logs.log_dirs
    }
    for tp, partition in sorted(replicas.partitions.items()):
        if asked is not None and tp not in asked:
            continue
        log = partition.log
        directory = str(log.dir.parent.resolve())
        if directory not in per_dir:
            continue  # being deleted (renamed away)
        per_dir[directory].setdefault(tp[0], []).append(
            {
                "partition_index": tp[1],
                "partition_size": log.size_bytes,
                "offset_lag": max(partition.high_watermark - log.log_end_offset, 0),
                "is_future_key": False,
            }
        )
    results = []
    offline = {str(d.resolve()) for d in replicas.logs.offline_dirs}
    for directory, topics in per_dir.items():
        if directory in offline:  # docs/contracts/log.md, "Log directory failure"
            results.append(
                {
                    "error_code": ErrorCode.KAFKA_STORAGE_ERROR,
                    "log_dir": directory,
                    "topics": [],
                    "total_bytes": -1,
                    "usable_bytes": -1,
                }
            )
            continue
        try:
            usage = shutil.disk_usage(directory)
            total, usable, code = usage.total, usage.free, ErrorCode.NONE
        except OSError:
            total, usable, code = -1, -1, ErrorCode.KAFKA_STORAGE_ERROR
        results.append(
            {
                "error_code": code,
                "log_dir": directory,
                "topics": [{"name": t, "partitions": ps} for t, ps in sorted(topics.items())],
                "total_bytes": total,
                "usable_bytes": usable,
            }
        )
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "results": results}


def error_response(body: dict, code: ErrorCode) -> dict:
    return {"throttle_time_ms": 0, "error_code": code, "results": []}


HANDLER = ApiHandler(DESCRIBE_LOG_DIRS_API, handle, error_response)
