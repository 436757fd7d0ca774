"""`dump-log`: what a log segment and its indexes hold, as Kafka's `kafka-dump-log.sh`
prints it, and where they are damaged.

    python -m broker.tools dump-log --files DIR/00000000000000000000.log[,...]
        [--print-data-log] [--deep-iteration] [--index-sanity-check] [--verify-index-only]

- `.log`: a line per batch (offsets, count, producer fields, leader epoch, position,
  timestamp, size, codec, CRC and whether it is valid); with `--deep-iteration` a line
  per record, with `--print-data-log` also its key and payload. A batch whose CRC does
  not match is printed with `isvalid: false`; bytes that are not a batch at all (a
  length below the minimum, a batch running past the end, an unknown magic) end the walk
  with the position and the reason, since nothing after them can be framed.
- `.index` / `.timeindex`: one line per entry, each checked against the segment's `.log`
  (an offset entry must point at the batch starting at that offset, a time entry at a
  batch whose max timestamp it is); `--index-sanity-check` only says whether the file is
  whole and ordered; `--verify-index-only` prints only the mismatches.

The segment layouts are docs/contracts/log.md's. Exit code 1 when any damage was found.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from broker.log.index import OffsetIndex, SparseIndex, TimeIndex
from broker.records.batch import CorruptRecordError, check_batch, decode_batch, iter_batches
from broker.records.compression import CODEC_NAMES
from broker.records.header import (
    DELETE_HORIZON,
    LOG_OVERHEAD,
    MAGIC_POS,
    MIN_BATCH_LENGTH,
    TIMESTAMP_TYPE_LOG_APPEND,
    parse_header,
    read_offset_and_length,
)
from broker.tools.output import Output

CODECS = {number: name for name, number in CODEC_NAMES.items()}


def main(argv: list[str] | None = None, output: Output | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="kafka-dump-log",
        description="Print the batches, records and index entries of log segments.",
    )
    parser.add_argument(
        "--files", required=True, help="comma-separated segment files (.log, .index, .timeindex)"
    )
    parser.add_argument(
        "--print-data-log", action="store_true", help="print records with their keys and payloads"
    )
    parser.add_argument(
        "--deep-iteration", action="store_true", help="print every record, not only batches"
    )
    parser.add_argument(
        "--index-sanity-check",
        action="store_true",
        help="only check that indexes are whole and ordered",
    )
    parser.add_argument(
        "--verify-index-only",
        action="store_true",
        help="print only index entries that do not match the log",
    )
    args = parser.parse_args(argv)
    out = output or Output()
    for name in args.files.split(","):
        path = Path(name)
        if not path.is_file():
            out.error(f"{path}: no such file")
            continue
        out.line(f"Dumping {path}")
        if path.suffix == ".log":
            dump_segment(
                path,
                out,
                records=args.deep_iteration or args.print_data_log,
                data=args.print_data_log,
            )
        elif path.suffix in (".index", ".timeindex"):
            dump_index(
                path,
                out,
                sanity_only=args.index_sanity_check,
                mismatches_only=args.verify_index_only,
            )
        else:
            out.warn(f"Ignoring unknown file {path}")
    return 1 if out.failed else 0


def base_offset_of(path: Path) -> int:
    try:
        return int(path.stem)
    except ValueError:
        raise SystemExit(f"Error: {path.name} is not named by its base offset") from None


# -- the log ------------------------------------------------------------------------------
def dump_segment(path: Path, out: Output, records: bool, data: bool) -> None:
    buf = path.read_bytes()
    out.line(f"Log starting offset: {base_offset_of(path)}")
    pos, last_offset = 0, None
    while pos < len(buf):
        problem = _framing_problem(buf, pos)
        if problem is not None:
            out.error(
                f"Found {len(buf) - pos} invalid bytes at position {pos} of {path.name}: {problem}"
            )
            return
        header = parse_header(buf, pos)
        try:
            check_batch(buf, pos)
            valid, why = True, ""
        except CorruptRecordError as exc:
            valid, why = False, str(exc)
        out.line(_batch_line(header, pos, valid))
        if not valid:
            out.error(f"Invalid batch at position {pos} of {path.name}: {why}")
        elif last_offset is not None and header.base_offset <= last_offset:
            out.error(
                f"Out of order offsets at position {pos} of {path.name}: batch starting at "
                f"{header.base_offset} after offset {last_offset}"
            )
        if valid and records:
            _dump_records(buf, pos, header, out, data, path)
        last_offset = header.last_offset
        pos += header.size


def _framing_problem(buf, pos: int) -> str | None:
    """Why the bytes at `pos` cannot be a batch (so the rest cannot be walked), or None."""
    if len(buf) - pos < LOG_OVERHEAD + MIN_BATCH_LENGTH:
        return "too short for a batch"
    _, length = read_offset_and_length(buf, pos)
    if length < MIN_BATCH_LENGTH:
        return f"batch length {length} is below the minimum {MIN_BATCH_LENGTH}"
    if pos + LOG_OVERHEAD + length > len(buf):
        return f"a batch of {LOG_OVERHEAD + length} bytes runs past the end of the file"
    if buf[pos + MAGIC_POS] != 2:
        return f"magic {buf[pos + MAGIC_POS]} (only record batches v2 are written)"
    return None


def _batch_line(h, pos: int, valid: bool) -> str:
    time_type = "LogAppendTime" if h.attributes & TIMESTAMP_TYPE_LOG_APPEND else "CreateTime"
    horizon = h.base_timestamp if h.attributes & DELETE_HORIZON else "OptionalLong.empty"
    return (
        f"baseOffset: {h.base_offset} lastOffset: {h.last_offset} count: {h.records_count} "
        f"baseSequence: {h.base_sequence} lastSequence: {h.last_sequence} "
        f"producerId: {h.producer_id} producerEpoch: {h.producer_epoch} "
        f"partitionLeaderEpoch: {h.partition_leader_epoch} "
        f"isTransactional: {str(h.is_transactional).lower()} "
        f"isControl: {str(h.is_control).lower()} deleteHorizonMs: {horizon} "
        f"position: {pos} {time_type}: {h.max_timestamp} size: {h.size} magic: {h.magic} "
        f"compresscodec: {CODECS.get(h.codec, h.codec)} crc: {h.crc} "
        f"isvalid: {str(valid).lower()}"
    )


def _dump_records(buf, pos: int, header, out: Output, data: bool, path: Path) -> None:
    try:
        _, decoded = decode_batch(buf, pos)
    except CorruptRecordError as exc:
        out.error(f"Records of the batch at position {pos} of {path.name} cannot be read: {exc}")
        return
    time_type = "LogAppendTime" if header.attributes & TIMESTAMP_TYPE_LOG_APPEND else "CreateTime"
    for r in decoded:
        sequence = (
            -1
            if header.base_sequence < 0
            else header.base_sequence + (r.offset - header.base_offset)
        )
        line = (
            f"| offset: {r.offset} {time_type}: {r.timestamp} "
            f"keySize: {-1 if r.key is None else len(r.key)} "
            f"valueSize: {-1 if r.value is None else len(r.value)} sequence: {sequence} "
            f"headerKeys: [{','.join(k for k, _ in r.headers)}]"
        )
        if data:
            line += f" key: {_text(r.key)} payload: {_text(r.value)}"
        out.line(line)


def _text(value: bytes | None) -> str:
    return "null" if value is None else value.decode("utf-8", "replace")


# -- the indexes ----------------------------------------------------------------------------
def dump_index(path: Path, out: Output, sanity_only: bool, mismatches_only: bool) -> None:
    base = base_offset_of(path)
    index: SparseIndex = (OffsetIndex if path.suffix == ".index" else TimeIndex)(path, base)
    size = path.stat().st_size
    if size % index.ENTRY.size:
        out.error(
            f"{path.name} failed sanity check: its size {size} is not a multiple of the "
            f"entry size {index.ENTRY.size} (a torn write)"
        )
        return
    raw = list(index.ENTRY.iter_unpack(path.read_bytes()))
    for i in range(1, len(raw)):
        if raw[i][0] <= raw[i - 1][0] or raw[i][1] < raw[i - 1][1]:
            out.error(
                f"{path.name} failed sanity check: entry {i} {raw[i]} is out of order after {raw[i - 1]}"
            )
            return
    if sanity_only:
        out.line(f"{path} passed sanity check.")
        return
    log = path.with_suffix(".log")
    batches = _batches(log.read_bytes()) if log.is_file() else None
    if batches is None:
        out.warn(f"{log.name} is missing: the entries cannot be checked against it")
    for key, value in raw:
        if path.suffix == ".index":
            offset, position = base + key, value
            problem = None
            if batches is not None:
                at = batches["by_position"].get(position)
                if at is None:
                    problem = f"no batch starts at position {position}"
                elif at != offset:
                    problem = f"the batch at position {position} starts at offset {at}"
            if not mismatches_only:
                out.line(f"offset: {offset} position: {position}")
            if problem:
                out.error(
                    f"Index mismatch in {path.name}: index offset {offset}, position {position}: {problem}"
                )
        else:
            timestamp, offset = key, base + value
            problem = None
            if batches is not None:
                max_timestamp = batches["max_timestamp"].get(offset)
                if max_timestamp is None:
                    problem = f"no batch starts at offset {offset}"
                elif max_timestamp != timestamp:
                    problem = f"the batch at offset {offset} has max timestamp {max_timestamp}"
            if not mismatches_only:
                out.line(f"timestamp: {timestamp} offset: {offset}")
            if problem:
                out.error(
                    f"Time index mismatch in {path.name}: timestamp {timestamp}, offset {offset}: {problem}"
                )


def _batches(buf) -> dict:
    """Base offset by position and max timestamp by base offset of the batches that can be
    framed (the log's own damage is dump_segment's to report)."""
    by_position, max_timestamp = {}, {}
    try:
        for pos, header in iter_batches(buf):
            by_position[pos] = header.base_offset
            max_timestamp[header.base_offset] = header.max_timestamp
    except CorruptRecordError:
        pass  # nothing after bytes that cannot be framed can be indexed
    return {"by_position": by_position, "max_timestamp": max_timestamp}
