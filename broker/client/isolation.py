"""Which fetched records a consumer hands out: `isolation.level` (KIP-98).

read_uncommitted (0, the Java consumer's default) returns every data record;
read_committed (1) asks the leader to stop at the last stable offset and skips the
records of aborted transactions, as Kafka's consumer does it from the Fetch answer's
`aborted_transactions` (producer id, first offset of each aborted transaction in the
answer's range):

- an aborted transaction becomes active for its producer when the reader reaches a
  batch ending at or after its first offset;
- a transactional batch of a producer with an active aborted transaction is skipped;
- that producer's ABORT marker ends it (later batches of the producer are read again);
- control batches (the markers) are never records, at either level.

The broker side (the last stable offset, the list) is in docs/contracts/transactions.md.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator

from broker.records.batch import Record, decode_batch, iter_batches
from broker.records.control import parse_marker
from broker.records.header import BatchHeader

READ_UNCOMMITTED = 0
READ_COMMITTED = 1
ISOLATION_LEVELS = {"read_uncommitted": READ_UNCOMMITTED, "read_committed": READ_COMMITTED}


def isolation_level(name: str) -> int:
    """The wire value of an `isolation.level` setting; ValueError naming it otherwise."""
    try:
        return ISOLATION_LEVELS[name]
    except KeyError:
        raise ValueError(
            f"Invalid value {name!r} for configuration isolation.level: "
            f"expected one of {', '.join(ISOLATION_LEVELS)}"
        ) from None


# What a reader at some isolation level makes of each batch of a fetch answer.
DATA = "data"  # records the reader sees
CONTROL = "control"  # a COMMIT/ABORT marker: never records, at either level
ABORTED = "aborted"  # records of an aborted transaction, left out at read_committed


def classify_batches(
    buf, level: int = READ_UNCOMMITTED, aborted: Iterable[tuple[int, int]] | None = None
) -> Iterator[tuple[int, BatchHeader, str]]:
    """(position, header, kind) of every complete batch in a fetched buffer, in order:
    the one place the rule above is applied, for the record-by-record reader
    (`visible_records`) and the columnar one (the hourly load, ingest/range_reader.py).
    `aborted` is the answer's (producer id, first offset) list (None or empty: nothing
    was aborted in this range)."""
    queue = [(first, pid) for pid, first in aborted or ()]
    heapq.heapify(queue)
    aborting: set[int] = set()
    for pos, header in iter_batches(buf):
        if level == READ_COMMITTED and header.producer_id >= 0:
            last_offset = header.next_offset - 1
            while queue and queue[0][0] <= last_offset:
                aborting.add(heapq.heappop(queue)[1])
            if header.is_control:
                marker = parse_marker(buf, pos, header)
                if header.producer_id in aborting and marker is not None and marker.is_abort:
                    aborting.discard(header.producer_id)
                yield pos, header, CONTROL
                continue
            if header.is_transactional and header.producer_id in aborting:
                yield pos, header, ABORTED
                continue
        yield pos, header, CONTROL if header.is_control else DATA


def visible_records(
    buf,
    start_offset: int,
    level: int = READ_UNCOMMITTED,
    aborted: Iterable[tuple[int, int]] | None = None,
) -> Iterator[Record]:
    """The data records of the complete batches in a fetched buffer, from `start_offset`
    on, that a consumer at `level` sees."""
    for pos, header, kind in classify_batches(buf, level, aborted):
        if kind != DATA or header.next_offset <= start_offset:
            continue
        for record in decode_batch(buf, pos)[1]:
            if record.offset >= start_offset:
                yield record
