"""kcat (Debian's package): -L, -P, -C."""

from __future__ import annotations

import shutil
import subprocess

import pytest

pytestmark = [
    pytest.mark.clients,
    pytest.mark.skipif(
        shutil.which("kcat") is None, reason="kcat not installed (./dev installs it)"
    ),
]


def kcat(*args: str, input: bytes | None = None) -> str:
    out = subprocess.run(["kcat", *args], input=input, capture_output=True, timeout=60)
    assert out.returncode == 0, out.stderr.decode()
    return out.stdout.decode()


def test_list_produce_consume(broker):
    lines = [f"line {i}" for i in range(100)]
    kcat(
        "-b",
        broker.bootstrap,
        "-P",
        "-t",
        "kcat-topic",
        "-p",
        "0",
        input="\n".join(lines).encode() + b"\n",
    )
    listing = kcat("-b", broker.bootstrap, "-L")
    assert 'topic "kcat-topic"' in listing
    assert "broker 0 at 127.0.0.1" in listing
    consumed = kcat(
        "-b", broker.bootstrap, "-C", "-t", "kcat-topic", "-p", "0", "-o", "beginning", "-e"
    )
    assert consumed.splitlines() == lines
    # From the middle, with offsets printed.
    tail = kcat(
        "-b",
        broker.bootstrap,
        "-C",
        "-t",
        "kcat-topic",
        "-p",
        "0",
        "-o",
        "95",
        "-e",
        "-f",
        "%o %s\n",
    )
    assert tail.splitlines() == [f"{i} line {i}" for i in range(95, 100)]
