"""dump-log against segments our log wrote: batches, records, index entries checked
against the log, and damage (a flipped byte, a torn tail, a bad index entry) named with
its position."""

from __future__ import annotations

import io

from broker.records.batch import build_batch
from broker.tools.dump_log import main
from broker.tools.output import Output
from tests.helpers.log_batches import append, open_log


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), Output(out, err))
    return code, out.getvalue(), err.getvalue()


def segment(tmp_path, batches: int = 5):
    """A closed log of `batches` batches of 3 keyed records, indexed every batch."""
    log = open_log(tmp_path, index_interval_bytes=1)
    for i in range(batches):
        records = [
            (b"k%d" % j, b"value-%d-%d" % (i, j), 1_000 + 10 * i + j, [("h", b"x")])
            for j in range(3)
        ]
        append(log, build_batch(records))
    log.close()
    return tmp_path / "t-0" / "00000000000000000000"


def test_batches_records_and_payloads(tmp_path):
    base = segment(tmp_path)
    code, out, err = run("--files", f"{base}.log")
    assert (code, err) == (0, "")
    batches = [line for line in out.splitlines() if line.startswith("baseOffset:")]
    assert len(batches) == 5
    assert batches[1].startswith("baseOffset: 3 lastOffset: 5 count: 3 ")
    assert "position: 0 CreateTime: 1002 " in batches[0] and "isvalid: true" in batches[0]
    assert "compresscodec: none" in batches[0]
    code, out, _ = run("--files", f"{base}.log", "--print-data-log")
    records = [line for line in out.splitlines() if line.startswith("| offset:")]
    assert len(records) == 15
    assert records[4] == (
        "| offset: 4 CreateTime: 1011 keySize: 2 valueSize: 9 sequence: -1 headerKeys: [h] "
        "key: k1 payload: value-1-1"
    )


def test_indexes_match_the_log(tmp_path):
    base = segment(tmp_path)
    code, out, err = run("--files", f"{base}.index,{base}.timeindex")
    assert (code, err) == (0, "")
    assert "offset: 3 position: " in out
    assert "timestamp: 1012 offset: 3" in out
    code, out, _ = run("--files", f"{base}.index", "--index-sanity-check")
    assert code == 0 and "passed sanity check." in out


def test_a_flipped_byte_is_an_invalid_batch_at_its_position(tmp_path):
    base = segment(tmp_path)
    data = bytearray(base.with_suffix(".log").read_bytes())
    second = _batch_starts(base)[1]
    data[second + 70] ^= 0xFF  # inside the second batch's records: the CRC no longer holds
    base.with_suffix(".log").write_bytes(bytes(data))
    code, out, err = run("--files", f"{base}.log", "--deep-iteration")
    assert code == 1
    invalid = [line for line in out.splitlines() if "isvalid: false" in line]
    assert len(invalid) == 1 and f"position: {second} " in invalid[0]
    assert f"Invalid batch at position {second} of 00000000000000000000.log: CRC mismatch" in err
    # The walk goes on: the batches after it are still printed.
    assert sum(line.startswith("baseOffset:") for line in out.splitlines()) == 5


def test_a_torn_tail_and_a_bad_index_entry(tmp_path):
    base = segment(tmp_path)
    log = base.with_suffix(".log")
    size = log.stat().st_size
    log.write_bytes(log.read_bytes() + b"\x00\x00\x00\x00\x00\x00\x00\x09\x00\x00\x01\x00garbage")
    code, _, err = run("--files", str(log))
    assert code == 1
    assert f"invalid bytes at position {size} of 00000000000000000000.log" in err
    index = base.with_suffix(".index")
    entries = bytearray(index.read_bytes())
    second_offset = int.from_bytes(entries[8:12], "big")  # relative to base offset 0
    inside = int.from_bytes(entries[4:8], "big") + 1  # inside the first indexed batch
    entries[12:16] = inside.to_bytes(4, "big")
    index.write_bytes(bytes(entries))
    code, out, err = run("--files", str(index), "--verify-index-only")
    assert code == 1 and "offset:" not in out
    assert (
        f"index offset {second_offset}, position {inside}: no batch starts at position {inside}"
    ) in err
    entries[12:16] = (7).to_bytes(4, "big")  # before the first entry's position
    index.write_bytes(bytes(entries))
    code, _, err = run("--files", str(index))
    assert code == 1 and "failed sanity check: entry 1" in err and "out of order" in err
    index.write_bytes(bytes(entries) + b"\x01\x02")
    code, _, err = run("--files", str(index), "--index-sanity-check")
    assert code == 1 and "failed sanity check" in err and "torn write" in err


def test_bad_arguments(tmp_path):
    code, _, err = run("--files", str(tmp_path / "missing.log"))
    assert code == 1 and "no such file" in err


def _batch_starts(base) -> list[int]:
    from broker.records.batch import iter_batches

    return [pos for pos, _ in iter_batches(base.with_suffix(".log").read_bytes())]
