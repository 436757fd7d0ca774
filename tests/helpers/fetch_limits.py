"""Partitions laid out in batches of chosen sizes, and raw Fetch answers measured on the
wire, for the tests of Fetch's size limits (docs/contracts/fetch.md, "Size limits")."""

from __future__ import annotations

import os
import socket
import struct

from broker.client.connection import BrokerConnection
from broker.protocol.apis import FETCH, PRODUCE
from broker.protocol.framing import decode_response, encode_request
from broker.records.batch import build_batch, iter_batches
from tests.helpers.wire import recv_exact


def value_of(partition: int, index: int, size: int) -> bytes:
    """A value naming its partition and place, padded (incompressible) to `size`."""
    head = f"{partition}-{index}-".encode()
    return head + os.urandom(max(0, size - len(head)))


def load(
    host: str, port: int, topic: str, layout: dict[int, list[int]], security=None
) -> dict[int, list[bytes]]:
    """Produce one record per batch, each value of the size `layout[partition]` lists
    (the batch is ~70 bytes more), acks=1, to a single broker leading every partition.
    Returns the values per partition in offset order."""
    sent: dict[int, list[bytes]] = {}
    with BrokerConnection(host, port, security=security) as conn:
        for partition, sizes in layout.items():
            sent[partition] = [value_of(partition, i, size) for i, size in enumerate(sizes)]
            for value in sent[partition]:
                batch = build_batch([(None, value, 1_000, [])])
                body = {
                    "transactional_id": None, "acks": 1, "timeout_ms": 10_000,
                    "topic_data": [{"name": topic, "partition_data": [
                        {"index": partition, "records": batch}
                    ]}],
                }  # fmt: skip
                answer = conn.request(PRODUCE, body)
                (p,) = answer["responses"][0]["partition_responses"]
                assert p["error_code"] == 0, p
    return sent


def raw_fetch(
    sock: socket.socket, topic: str, offsets: dict[int, int], max_bytes: int, partition_max: int
) -> tuple[int, dict[int, list[int]]]:
    """One Fetch v11 for `offsets` (partition -> offset, in that order): (the response
    frame's size, as a client's receive limit counts it; per partition answered, the
    sizes of its complete batches)."""
    body = {
        "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": max_bytes,
        "isolation_level": 0, "session_id": 0, "session_epoch": -1,
        "topics": [{"topic": topic, "partitions": [
            {"partition": p, "current_leader_epoch": -1, "fetch_offset": o,
             "log_start_offset": -1, "partition_max_bytes": partition_max}
            for p, o in offsets.items()
        ]}],
        "forgotten_topics_data": [], "rack_id": "",
    }  # fmt: skip
    sock.sendall(encode_request(FETCH, 11, 1, "limits", body))
    (size,) = struct.unpack(">i", recv_exact(sock, 4))
    _, answer = decode_response(FETCH, 11, recv_exact(sock, size))
    batches = {}
    for t in answer["responses"]:
        for p in t["partitions"]:
            assert p["error_code"] == 0, p
            data = bytes(p["records"])
            batches[p["partition_index"]] = [h.size for _, h in iter_batches(data)]
            assert sum(batches[p["partition_index"]]) == len(data), "a batch was cut"
    return size, batches


def check_limits(
    order: list[int], batches: dict[int, list[int]], max_bytes: int, partition_max: int
) -> None:
    """Kafka's rule: each partition within its limit and the answer within max_bytes,
    except the first partition with data, which may carry one larger batch (then alone
    in that partition)."""
    total, first = 0, True
    for p in order:
        sizes = batches.get(p, [])
        size = sum(sizes)
        if sizes and first and size > min(partition_max, max_bytes):
            assert len(sizes) == 1, (p, sizes)
        else:
            assert size <= min(partition_max, max(0, max_bytes - total)), (p, sizes, total)
        total += size
        first = first and not sizes


def read_all_raw(
    host: str, port: int, topic: str, ends: dict[int, int], max_bytes: int, partition_max: int
) -> list[int]:
    """Fetch every partition to its end as a rotating consumer does (a partition that got
    records goes to the back), checking every answer; returns the frame sizes."""
    offsets = dict.fromkeys(ends, 0)
    frames = []
    with socket.create_connection((host, port)) as sock:
        while any(offsets[p] < ends[p] for p in ends):
            order = [p for p in offsets if offsets[p] < ends[p]]
            size, batches = raw_fetch(sock, topic, {p: offsets[p] for p in order}, max_bytes,
                                      partition_max)  # fmt: skip
            check_limits(order, batches, max_bytes, partition_max)
            assert any(batches.values()), "an answer without progress"
            frames.append(size)
            served = [p for p in order if batches.get(p)]
            for p in served:
                offsets[p] += len(batches[p])  # one record per batch
                offsets[p] = offsets.pop(p)  # to the back
    return frames
