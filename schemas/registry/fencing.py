"""The registry leader's fencing token: a leader epoch kept in the store itself.

Several instances elect one leader (election.py), but an election cannot stop an old
leader that was paused (SIGSTOP, a long GC, a frozen VM) from appending once it wakes
up, before its heartbeat notices it lost the group. So every reader, leader and
followers alike, decides from the log alone which appends count
(docs/contracts/registry.md, "Fencing"):

- A leader starts its leadership by reading the store to its end and appending a
  **marker** ``{"keytype":"LEADER_EPOCH","nonce","magic":0}`` →
  ``{"epoch","nonce","leader","generation"}`` with ``epoch`` one above the highest epoch
  it has read. A marker is **admitted** when its epoch is above every admitted marker's
  before it; otherwise it is void (a leader that raced another, or read a stale log).
  The leader writes only once its own marker is admitted.
- Every other entry the leader appends carries its epoch in the record header
  ``registry-epoch``. An entry whose epoch is below the admitted epoch at its place in
  the log is **dropped** by every reader: it was written by a leader that was
  superseded. Entries without the header (a registry before fencing, or alone) count.

So every admitted entry lies between its leader's marker and the next admitted marker,
and each marker's writer had applied everything before it before handing out an id:
ids and versions stay unique whatever paused leaders append.

Marker keys carry a nonce, so compaction keeps every marker (a few per leadership
change). A dropped entry may share its key with an admitted one; the leader appends the
admitted value again (``repairs``) so compaction keeps the admitted one.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass

log = logging.getLogger(__name__)

MARKER = "LEADER_EPOCH"
EPOCH_HEADER = "registry-epoch"


def marker_key(nonce: str) -> dict:
    return {"keytype": MARKER, "nonce": nonce, "magic": 0}


def marker_value(epoch: int, nonce: str, leader: str, generation: int | None) -> dict:
    return {"epoch": epoch, "nonce": nonce, "leader": leader, "generation": generation}


def encode_epoch(epoch: int | None) -> list[tuple[str, bytes]]:
    return [] if epoch is None else [(EPOCH_HEADER, str(epoch).encode())]


def decode_epoch(headers) -> int | None:
    """The epoch header of a record (None without one, or an unreadable one)."""
    for name, value in headers or ():
        if name == EPOCH_HEADER and value is not None:
            try:
                return int(value)
            except ValueError:
                return None
    return None


@dataclass(frozen=True)
class Admitted:
    """An admitted marker: the current leader epoch and whose it is."""

    epoch: int
    nonce: str
    leader: str


class Fence:
    """What the log says so far about leader epochs (pure: fed one entry at a time, in
    log order, by the registry's reader)."""

    def __init__(self) -> None:
        self.current = Admitted(0, "", "")
        self._lock = threading.Lock()
        # key (as a canonical string) -> (key, value) of the last admitted entry, so a
        # key a dropped entry shadows can be written again (compaction keeps the latest).
        self._admitted: dict[str, tuple[dict, dict | None]] = {}
        self.repairs: dict[str, tuple[dict, dict | None]] = {}
        self.dropped = 0

    @property
    def epoch(self) -> int:
        return self.current.epoch

    def admit(self, offset: int, key: dict, value: dict | None, epoch: int | None) -> bool:
        """Whether the entry at ``offset`` counts; markers move the current epoch."""
        with self._lock:
            if key.get("keytype") == MARKER:
                if value is None:
                    return False
                if value["epoch"] > self.current.epoch:
                    self.current = Admitted(value["epoch"], value["nonce"], value.get("leader", ""))
                    return True
                return False
            name = _name(key)
            if epoch is not None and epoch < self.current.epoch:
                self.dropped += 1
                log.warning(
                    "dropping the entry at offset %d (%s): written at leader epoch %d, "
                    "superseded by epoch %d of %s",
                    offset, name, epoch, self.current.epoch, self.current.leader,
                )  # fmt: skip
                if name in self._admitted:
                    self.repairs[name] = self._admitted[name]
                return False
            self._admitted[name] = (key, value)
            self.repairs.pop(name, None)
            return True

    def take_repairs(self) -> list[tuple[dict, dict | None]]:
        with self._lock:
            found, self.repairs = list(self.repairs.values()), {}
            return found


def _name(key: dict) -> str:
    return repr(sorted(key.items()))
