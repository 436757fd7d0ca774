"""A slice of an open file that the network layer sends without copying it through Python."""

from __future__ import annotations

import os
from typing import NamedTuple


class FileRegion(NamedTuple):
    """`size` bytes of the open file `fd` starting at `position`.

    The fd belongs to a log segment; segments deleted by retention are closed only
    after a delay, so a region handed to a pending fetch stays readable.
    """

    fd: int
    position: int
    size: int

    def __len__(self) -> int:
        return self.size

    def read(self) -> bytes:
        """The bytes themselves, for transports that cannot sendfile (and for tests)."""
        return os.pread(self.fd, self.size, self.position)
