"""Runs staged the way the load's tasks stage them, for the commit protocol's tests."""

from __future__ import annotations

from ingest import layout
from ingest.manifest import DataFile, ErrorFile, Gap, Manifest, PartitionLedger

R1 = "20261122T030000.000Z-00000001"
R2 = "20261122T040000.000Z-00000002"
R3 = "20261122T050000.000Z-00000003"
HOURS = [layout.Hour("2026-11-22", "01"), layout.Hour("2026-11-22", "02")]


def stage_run(fs, run, kind="load", replaces=None, ranges=((0, 0, 10), (1, 5, 9)), tag=b""):
    """Stage a run the way tasks do and return (manifest, moves): per partition one file per
    hour, partition 0 also quarantines a record."""
    partitions, moves = [], []
    for partition, first, next_ in ranges:
        files, errors = [], []
        quarantined = 1 if partition == 0 and next_ > first else 0
        remaining = next_ - first - quarantined
        for i, hour in enumerate(HOURS):
            records = remaining // 2 if i == 0 else remaining - remaining // 2
            if not records:
                continue
            final = layout.data_file("clicks", hour, partition, first, next_, run, "parquet")
            staged = f"{layout.staging_dir(run)}/p{partition}/attempt-0/{hour.hr}.parquet"
            fs.write_bytes(staged, f"p{partition} {hour.hr}: {records} records".encode() + tag)
            files.append(DataFile(final, records, hour.dt, hour.hr))
            moves.append((staged, final))
        if quarantined:
            final = layout.errors_file("clicks", run, partition, first, next_, "jsonl")
            staged = f"{layout.staging_dir(run)}/p{partition}/attempt-0/errors.jsonl"
            fs.write_bytes(staged, b'{"offset": 3, "reason": "bad magic"}\n' + tag)
            errors.append(ErrorFile(final, 1))
            moves.append((staged, final))
        partitions.append(
            PartitionLedger(
                "clicks",
                partition,
                first,
                next_,
                loaded=remaining,
                quarantined=quarantined,
                files=files,
                error_files=errors,
                schema_ids=[1, 2],
                gap=Gap(2, 5) if first == 5 else None,
                leader=partition,
                read_from=[partition, partition + 1],  # the leadership moved mid-range
            )
        )
    manifest = Manifest(
        run_id=run,
        kind=kind,
        created_at="2026-11-22T03:00:00.000Z",
        window_ms=600_000,
        partitions=partitions,
        previous_run=None,
        replaces=replaces,
    )
    return manifest, moves


def tree(fs, path=""):
    """Every file below ``path`` with its bytes."""
    out = {}
    for st in fs.list(path):
        if st.is_dir:
            out.update(tree(fs, st.path))
        else:
            out[st.path] = fs.read_bytes(st.path)
    return out
