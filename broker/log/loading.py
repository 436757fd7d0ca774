"""Reading a whole partition log back in chunks, without blocking the event loop: how the
group coordinator loads an `__consumer_offsets` partition and the transaction
coordinator a `__transaction_state` one when they become its leader
(docs/contracts/consumer-groups.md, docs/contracts/transactions.md).

The log is read from its start to the end it had when the load began, `chunk_bytes` at
a time, yielding to other requests between chunks; each batch comes once, in log order.
What the batches mean is the caller's.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import NamedTuple

from broker.log.log import Log, OffsetOutOfRange
from broker.records.batch import CorruptRecordError, iter_batches
from broker.records.header import BatchHeader


class LoadedBatch(NamedTuple):
    """One batch of a chunk: `data[pos:]` starts with it."""

    data: bytes
    pos: int
    header: BatchHeader


async def read_batches(
    current_log: Callable[[], Log | None],
    still_wanted: Callable[[], bool],
    chunk_bytes: int,
) -> AsyncIterator[LoadedBatch]:
    """Every batch of the log `current_log()` returns, from its log start to its end
    when the read began. Stops early (quietly) once `still_wanted()` is false or the
    partition is gone (`current_log()` None): leadership moved, the caller drops what it
    read. Both are asked again before every chunk, as the partition may change hands
    between them. Raises CorruptRecordError when a chunk holds no complete batch."""
    log = current_log()
    if log is None:
        return
    offset, end = log.log_start_offset, log.log_end_offset
    while offset < end:
        await asyncio.sleep(0)  # serve other requests between chunks
        if not still_wanted():
            return
        log = current_log()
        if log is None:
            return
        try:
            read = log.read(offset, chunk_bytes, max_offset=end)
        except OffsetOutOfRange:
            # Retention or compaction moved the start (always to a batch boundary).
            offset = log.log_start_offset
            continue
        if not read.regions:
            return
        data = b"".join(bytes(region.read()) for region in read.regions)
        following = offset
        for pos, header in iter_batches(data):
            # A read starts at the batch holding `offset`: one seen in the last chunk
            # would come again.
            if header.next_offset > offset:
                yield LoadedBatch(data, pos, header)
            following = max(following, header.next_offset)
        if following <= offset:
            raise CorruptRecordError(f"no complete batch at offset {offset}")
        offset = following
