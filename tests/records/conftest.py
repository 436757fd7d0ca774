"""kafka-python as an independent reference implementation of batches and codecs.

kafka-python finds its snappy/lz4/zstd codecs through optional libraries that are not
installed here; the fixture plugs cramjam's raw codecs in underneath, so kafka-python's
own framing code (xerial chunks, batch layout, varints) is still what runs.
"""

from __future__ import annotations

from types import SimpleNamespace

import cramjam
import pytest


@pytest.fixture
def kafka_python_codecs(monkeypatch):
    import kafka.codec as codec
    import kafka.record.default_records as default_records

    monkeypatch.setattr(
        codec,
        "snappy",
        SimpleNamespace(
            compress=lambda data: bytes(cramjam.snappy.compress_raw(data)),
            decompress=lambda data: bytes(cramjam.snappy.decompress_raw(data)),
        ),
    )
    # cramjam's default lz4 frame links blocks and carries checksums: a harder case
    # for our reader than the Java-style frames we write.
    monkeypatch.setattr(codec, "lz4", SimpleNamespace())
    monkeypatch.setattr(
        default_records, "lz4_encode", lambda data: bytes(cramjam.lz4.compress(data))
    )
    monkeypatch.setattr(
        default_records, "lz4_decode", lambda data: bytes(cramjam.lz4.decompress(data))
    )
    monkeypatch.setattr(codec, "zstd", SimpleNamespace())
    monkeypatch.setattr(
        default_records, "zstd_encode", lambda data: bytes(cramjam.zstd.compress(data))
    )
    monkeypatch.setattr(
        default_records, "zstd_decode", lambda data: bytes(cramjam.zstd.decompress(data))
    )
    return codec
