"""Helpers for the log tests: v2 batches from broker.records.batch, appended and read back."""

from __future__ import annotations

from broker.log.config import LogConfig
from broker.log.log import AppendInfo, Log, ReadResult
from broker.records.batch import build_batch, iter_batches
from broker.records.header import BatchHeader
from tests.helpers.clock import Clock


def open_log(path, clock=None, **config) -> Log:
    """The log of partition t-0 under `path`, with LogConfig(**config), on a test clock."""
    return Log.open(path / "t-0", "t", 0, LogConfig(**config), now_ms=clock or Clock())


def batch(count: int = 1, timestamp: int = 1_000, value_size: int = 10, tag: int = 0) -> bytes:
    """One uncompressed batch of `count` records; values carry `tag` to tell batches apart."""
    value = (b"%d:" % tag).ljust(value_size, b"x")
    return build_batch([(None, value, timestamp + i, []) for i in range(count)])


def produced(*batches: bytes) -> tuple[bytearray, list[tuple[int, BatchHeader]]]:
    """What validation hands the log: the request's bytes and (position, header) per batch."""
    buf = bytearray(b"".join(batches))
    return buf, list(iter_batches(buf))


def append(log: Log, *batches: bytes, epoch: int = 0) -> AppendInfo:
    return log.append(*produced(*batches), leader_epoch=epoch)


def data_of(result: ReadResult) -> bytes:
    return b"".join(region.read() for region in result.regions)


def batch_offsets(data: bytes) -> list[tuple[int, int]]:
    """(base offset, last offset) of every batch in read data; asserts it is whole batches."""
    out, end = [], 0
    for pos, header in iter_batches(data):
        out.append((header.base_offset, header.last_offset))
        end = pos + header.size
    assert end == len(data), "read returned a partial batch"
    return out
