from __future__ import annotations

import pytest

from broker.log.checkpoint import CorruptCheckpoint, read_checkpoint, write_checkpoint


def test_round_trip_in_kafkas_format(tmp_path):
    path = tmp_path / "recovery-point-offset-checkpoint"
    offsets = {("orders", 0): 42, ("my-topic.v2", 11): 0, ("orders", 1): 2**40}
    write_checkpoint(path, offsets)
    assert read_checkpoint(path) == offsets
    assert path.read_text().splitlines() == [
        "0",
        "3",
        "my-topic.v2 11 0",
        "orders 0 42",
        f"orders 1 {2**40}",
    ]
    assert not (tmp_path / "recovery-point-offset-checkpoint.tmp").exists()


def test_rewrite_replaces_and_empty_is_allowed(tmp_path):
    path = tmp_path / "cp"
    write_checkpoint(path, {("a", 0): 1})
    write_checkpoint(path, {})
    assert read_checkpoint(path) == {}
    assert path.read_text() == "0\n0\n"


def test_missing_file_reads_as_empty(tmp_path):
    assert read_checkpoint(tmp_path / "nope") == {}


@pytest.mark.parametrize(
    "text",
    ["", "1\n0\n", "0\n2\na 0 1\n", "0\n1\na zero 1\n", "0\n1\njunk\n"],
)
def test_malformed_files_are_refused(tmp_path, text):
    path = tmp_path / "cp"
    path.write_text(text)
    with pytest.raises(CorruptCheckpoint):
        read_checkpoint(path)
