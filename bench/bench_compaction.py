"""Log compaction throughput: MB of log cleaned per CPU second of the cleaner thread, against
rewriting the same segments without deduplication, in the same run.

    .venv/bin/python -m bench.bench_compaction [--megabytes 100] [--keys 50000] [--codec lz4]

The log: `--megabytes` of batches of 50 records, keys drawn from `--keys` distinct
16-byte keys, 100-byte values (so each key is updated about 15 times per 100 MB), every
segment below the active one dirty. "Ours" is one `LogCleaner.clean_once` (the offset
map pass, the rewrite of every segment into `.cleaned` segments with their indexes,
fsync, the swap). The baseline reads the same segments through the cleaner's own reader
(pread of log.cleaner.io.buffer.size, CRC check of every batch) and writes every batch
unchanged into a new segment with its indexes, fsynced: the cleaner's I/O with the
deduplication taken out, so the ratio is what deduplication (two walks of every record,
the key map, rebuilding batches) costs on top of the I/O any cleaner must do. Printed
too: a plain file copy (copy_file_range, never enters Python), and every record decoded
and re-encoded with the record codec (decode_batch, build_batch), nothing dropped: what
a cleaner built on that codec would spend before deduplicating anything.
Best of `--rounds` rounds, each on a fresh copy of the log.
"""

from __future__ import annotations

import argparse
import random
import shutil
import tempfile
import time
from pathlib import Path

from broker.log import LogConfig, LogManager
from broker.log.cleaner import CleanerConfig, LogCleaner
from broker.log.segment import LogSegment
from broker.records.batch import build_batch, decode_batch, iter_batches
from broker.records.header import CODEC_LZ4, CODEC_NONE

CONFIG = LogConfig(cleanup_policy=("compact",), segment_bytes=64 << 20)


def build(path: Path, megabytes: int, keys: int, codec: int) -> int:
    manager = LogManager([path], CONFIG)
    manager.load()
    log = manager.create("bench", 0)
    rng = random.Random(7)
    values = [rng.randbytes(100) for _ in range(64)]
    timestamp = 1_714_566_600_000
    while log.size_bytes < megabytes << 20:
        records = [
            (b"key-%012d" % rng.randrange(keys), rng.choice(values), timestamp + i, [])
            for i in range(50)
        ]
        buf = bytearray(build_batch(records, codec=codec))
        log.append(buf, list(iter_batches(buf)), leader_epoch=0)
        timestamp += 50
    log.roll()  # everything written so far lies below the active segment
    size = log.size_bytes
    manager.close()
    return size


def open_copy(source: Path, work: Path) -> LogManager:
    target = Path(tempfile.mkdtemp(dir=work))
    shutil.rmtree(target)
    shutil.copytree(source, target)
    manager = LogManager([target], CONFIG)
    manager.load()
    return manager


def cleaned(source: Path, work: Path) -> tuple[int, float]:
    manager = open_copy(source, work)
    result = LogCleaner(manager, CleanerConfig()).clean_once()
    manager.close()
    return result.stats.bytes_read, result.cpu_seconds


def rewritten(source: Path, work: Path) -> tuple[int, float]:
    """Every batch read and CRC-checked as the cleaner reads it, written back unchanged."""
    manager = open_copy(source, work)
    cleaner = LogCleaner(manager, CleanerConfig())
    job = cleaner.grab_filthiest()
    started, total = time.thread_time(), 0
    for source_segment in job.sources:
        base = source_segment.info.base_offset
        copy = LogSegment.create(job.directory, base, CONFIG.index_interval_bytes, ".copy")
        out, positions = bytearray(), []
        for header, batch, _ in job.read_batches(source_segment):
            positions.append((len(out), header))
            out += batch
            total += header.size
            if len(out) >= job.io_buffer_size:
                copy.append(out, positions, 0)
                out, positions = bytearray(), []
        if out:
            copy.append(out, positions, 0)
        copy.seal()
        copy.flush()
        copy.close()
    elapsed = time.thread_time() - started
    cleaner.abandon(job)
    manager.close()
    return total, elapsed


def reencoded(source: Path, work: Path) -> tuple[int, float]:
    """Every record decoded and encoded again (decode_batch, build_batch), nothing
    dropped: a cleaner written with the record codec consumers use."""
    manager = open_copy(source, work)
    cleaner = LogCleaner(manager, CleanerConfig())
    job = cleaner.grab_filthiest()
    started, total = time.thread_time(), 0
    for source_segment in job.sources:
        for header, batch, _ in job.read_batches(source_segment):
            _, records = decode_batch(batch)
            rebuilt = [(r.key, r.value, r.timestamp, r.headers) for r in records]
            build_batch(rebuilt, codec=header.codec, base_offset=header.base_offset)
            total += header.size
    elapsed = time.thread_time() - started
    cleaner.abandon(job)
    manager.close()
    return total, elapsed


def copied(source: Path, work: Path) -> tuple[int, float]:
    target = Path(tempfile.mkdtemp(dir=work))
    started, total = time.thread_time(), 0
    for path in sorted((source / "bench-0").glob("*.log")):
        shutil.copyfile(path, target / path.name)
        total += path.stat().st_size
    return total, time.thread_time() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--megabytes", type=int, default=100)
    parser.add_argument("--keys", type=int, default=50_000)
    parser.add_argument("--codec", choices=["none", "lz4"], default="none")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    codec = CODEC_LZ4 if args.codec == "lz4" else CODEC_NONE
    with tempfile.TemporaryDirectory(prefix="bench-compaction-") as work:
        work = Path(work)
        source = work / "source"
        size = build(source, args.megabytes, args.keys, codec)
        print(f"log: {size / 1e6:.0f} MB, {args.keys} keys, codec {args.codec}", flush=True)
        best = {"ours": 0.0, "rewrite": 0.0, "reencode": 0.0, "copy": 0.0}
        runs = (
            ("ours", cleaned),
            ("rewrite", rewritten),
            ("reencode", reencoded),
            ("copy", copied),
        )
        for _ in range(args.rounds):
            for name, run in runs:
                total, cpu = run(source, work)
                best[name] = max(best[name], total / 1e6 / cpu)
        print(f"plain file copy: {best['copy']:,.0f} MB per CPU second")
        print(f"records decoded and re-encoded, none dropped: {best['reencode']:,.1f} MB/s")
        ratio = best["ours"] / best["rewrite"]
        print(
            f"compaction: ours {best['ours']:,.1f} MB/s of log cleaned per CPU second, "
            f"rewrite without deduplication {best['rewrite']:,.1f} MB/s, ratio {ratio:.2f}"
        )


if __name__ == "__main__":
    main()
