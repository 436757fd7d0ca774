"""The one definition of a timestamp's window, for ints and for Arrow arrays alike."""

import pyarrow as pa
import pytest

from broker.util.clock import DAY_MS, HOUR_MS, MINUTE_MS
from schemas.windows import DEFAULT_AUDIT_WINDOW_MS, window_start

STAMPS = [0, 1, 599_999, 600_000, 1_714_566_612_345, -1, -600_000, -600_001, -HOUR_MS - 1]


@pytest.mark.parametrize("window_ms", [DEFAULT_AUDIT_WINDOW_MS, MINUTE_MS, HOUR_MS, DAY_MS, 7])
def test_ints_and_arrays_agree_also_before_1970(window_ms):
    scalars = [window_start(t, window_ms) for t in STAMPS]
    for t, start in zip(STAMPS, scalars, strict=True):
        assert start <= t < start + window_ms and start % window_ms == 0
    assert window_start(pa.array(STAMPS, pa.int64()), window_ms).to_pylist() == scalars


def test_examples():
    assert window_start(1_714_566_612_345, DEFAULT_AUDIT_WINDOW_MS) == 1_714_566_600_000
    assert window_start(-1, HOUR_MS) == -HOUR_MS
    assert window_start(pa.array([None, 5], pa.int64()), 10).to_pylist() == [None, 0]
