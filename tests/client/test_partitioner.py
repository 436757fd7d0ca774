from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kafka.partitioner.default import murmur2 as kafka_python_murmur2

from broker.client.partitioner import murmur2, partition_for_key, to_positive

# From apache/kafka clients/src/test/java/org/apache/kafka/common/utils/UtilsTest.java
# (testMurmur2), as signed Java ints.
JAVA_VECTORS = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
}


@pytest.mark.parametrize("key", list(JAVA_VECTORS))
def test_java_vectors(key):
    assert murmur2(key) == JAVA_VECTORS[key]


@given(st.binary(max_size=100))
def test_agrees_with_kafka_python(key):
    # kafka-python returns the same 32 bits unsigned.
    assert murmur2(key) & 0xFFFFFFFF == kafka_python_murmur2(key)
    assert -(2**31) <= murmur2(key) < 2**31


def test_partition_for_key_uses_to_positive_not_abs():
    assert partition_for_key(b"foobar", 50) == (-790332482 & 0x7FFFFFFF) % 50
    assert to_positive(-(2**31)) == 0
    assert to_positive(-1) == 0x7FFFFFFF


@given(st.binary(max_size=50), st.integers(min_value=1, max_value=1000))
def test_partition_in_range(key, partitions):
    assert 0 <= partition_for_key(key, partitions) < partitions


def test_accepts_bytearray_and_memoryview():
    assert murmur2(bytearray(b"foobar")) == murmur2(memoryview(b"foobar")) == -790332482


def test_rejects_zero_partitions():
    with pytest.raises(ValueError):
        partition_for_key(b"k", 0)
