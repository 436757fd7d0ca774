"""The generated protocol codec (broker/protocol/codegen.py) against the closure codec it
falls back to (issue 23), in the same run: microseconds per operation on the bodies the
broker's hot paths and a 10,000-partition failover handle, rounds alternating, medians.

    .venv/bin/python -m bench.bench_codec [--rounds 7]
"""

from __future__ import annotations

import argparse
import statistics
import time

from broker.protocol.apis import API_BY_KEY
from broker.protocol.codec import compile_struct, reference_struct
from broker.protocol.framing import decode_request_header, encode_request
from broker.protocol.types import Reader, Writer
from tests.helpers.server_requests import produce_body, values

RECORDS = values(b"x" * 100)


def _pair(api_key: int, version: int, response: bool):
    api = API_BY_KEY[api_key]
    s = api.response if response else api.request
    flexible = api.is_flexible(version)
    return {
        "generated": compile_struct(s, version, flexible),
        "closure": reference_struct(s, version, flexible),
    }


def _encode_op(codec, body):
    def run():
        codec.encode(Writer(), body)

    return run


def _decode_op(codec, data):
    def run():
        codec.decode(Reader(data))

    return run


def _bytes(codec, body) -> bytes:
    w = Writer()
    codec.encode(w, body)
    return b"".join(bytes(p) for p in w.getparts())


def _fetch_response(partitions: int) -> dict:
    return {
        "throttle_time_ms": 0,
        "error_code": 0,
        "session_id": 7,
        "responses": [
            {
                "topic": "t",
                "partitions": [
                    {
                        "partition_index": p,
                        "error_code": 0,
                        "high_watermark": 1000,
                        "last_stable_offset": 1000,
                        "log_start_offset": 0,
                        "aborted_transactions": [],
                        "preferred_read_replica": -1,
                        "records": RECORDS,
                    }
                    for p in range(partitions)
                ],
            }
        ],
    }


def _metadata_response(partitions: int) -> dict:
    return {
        "brokers": [{"node_id": i, "host": "127.0.0.1", "port": 9092 + i} for i in range(3)],
        "cluster_id": "c",
        "controller_id": 0,
        "topics": [
            {
                "error_code": 0,
                "name": "t",
                "is_internal": False,
                "partitions": [
                    {
                        "error_code": 0,
                        "partition_index": p,
                        "leader_id": p % 3,
                        "leader_epoch": 3,
                        "replica_nodes": [0, 1, 2],
                        "isr_nodes": [0, 1, 2],
                        "offline_replicas": [],
                    }
                    for p in range(partitions)
                ],
            }
        ],
    }


def _leader_and_isr(partitions: int) -> dict:
    return {
        "controller_id": 0,
        "controller_epoch": 1,
        "broker_epoch": 5,
        "topic_states": [
            {
                "topic_name": "t",
                "partition_states": [
                    {
                        "partition_index": p,
                        "controller_epoch": 1,
                        "leader": p % 3,
                        "leader_epoch": 4,
                        "isr": [0, 1, 2],
                        "zk_version": 4,
                        "replicas": [0, 1, 2],
                        "adding_replicas": [],
                        "removing_replicas": [],
                        "is_new": False,
                    }
                    for p in range(partitions)
                ],
            }
        ],
        "live_leaders": [
            {"broker_id": i, "host_name": "127.0.0.1", "port": 9092} for i in range(3)
        ],
    }


def operations() -> list[tuple[str, dict, int]]:
    """(name, {variant: callable}, calls per round)."""
    ops = []
    for version in (9, 10):
        pair = _pair(0, version, False)
        data = _bytes(pair["closure"], produce_body("t", RECORDS, acks=1))
        ops.append(
            (
                f"Produce v{version} request decode, 1 record",
                {k: _decode_op(c, data) for k, c in pair.items()},
                3000,
            )
        )
    pair = _pair(0, 9, True)
    answer = {
        "responses": [
            {
                "name": "t",
                "partition_responses": [
                    {
                        "index": 0,
                        "error_code": 0,
                        "base_offset": 5,
                        "log_append_time_ms": -1,
                        "log_start_offset": 0,
                        "record_errors": [],
                        "error_message": None,
                    }
                ],
            }
        ],
        "throttle_time_ms": 0,
    }
    ops.append(
        ("Produce v9 response encode", {k: _encode_op(c, answer) for k, c in pair.items()}, 3000)
    )
    for version in (10, 11):
        for n, calls in ((1, 3000), (1000, 10)):
            pair = _pair(1, version, True)
            body = _fetch_response(n)
            ops.append(
                (
                    f"Fetch v{version} response encode, {n:,} partitions",
                    {k: _encode_op(c, body) for k, c in pair.items()},
                    calls,
                )
            )
    pair = _pair(3, 9, True)
    body = _metadata_response(10_000)
    ops.append(
        (
            "Metadata v9 response encode, 10,000 partitions",
            {k: _encode_op(c, body) for k, c in pair.items()},
            2,
        )
    )
    pair = _pair(4, API_BY_KEY[4].max_version, False)
    body = _leader_and_isr(10_000)
    data = _bytes(pair["closure"], body)
    ops.append(
        (
            "LeaderAndIsr request encode, 10,000 partitions",
            {k: _encode_op(c, body) for k, c in pair.items()},
            2,
        )
    )
    ops.append(
        (
            "LeaderAndIsr request decode, 10,000 partitions",
            {k: _decode_op(c, data) for k, c in pair.items()},
            2,
        )
    )
    frame = encode_request(0, 9, 1, "producer-1", produce_body("t", RECORDS, acks=1))[4:]
    ops.append(
        (
            "request header decode",
            {
                "generated": lambda: decode_request_header(frame),
                "closure": lambda: decode_request_header(frame, 2),  # the Reader path
            },
            3000,
        )
    )
    return ops


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    print("| operation | closure us | generated us | speed-up |")
    print("|---|---:|---:|---:|")
    for name, variants, calls in operations():
        times: dict[str, list[float]] = {k: [] for k in variants}
        for round_ in range(args.rounds + 1):  # round 0 warms up
            order = sorted(variants, reverse=bool(round_ % 2))
            for k in order:
                fn = variants[k]
                start = time.perf_counter()
                for _ in range(calls):
                    fn()
                if round_:
                    times[k].append((time.perf_counter() - start) / calls * 1e6)
        c, g = statistics.median(times["closure"]), statistics.median(times["generated"])
        print(f"| {name} | {c:,.1f} | {g:,.1f} | {c / g:.2f}x |", flush=True)


if __name__ == "__main__":
    main()
