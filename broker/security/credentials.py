"""SCRAM credentials: user -> mechanism -> ScramCredential, as Kafka stores them.

One user's entry is the JSON of Kafka's ZooKeeper node `/config/users/<user>`:
`{"version": 1, "config": {"SCRAM-SHA-256": "salt=..,stored_key=..,server_key=..,iterations=n"}}`
(docs/contracts/security.md). A single broker reads them from a file holding an object of
user name -> that entry (`sasl.scram.credentials.file`), re-read when the file changes so
users can be added without a restart. `scram(user, mechanism)` is the read API the SASL
server uses; `replace(user, entries)` sets or removes a user's entries (the credential
administration and a ZooKeeper source write through it).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from pathlib import Path

from broker.security.scram import MECHANISMS, ScramCredential, ScramError

log = logging.getLogger(__name__)


def parse_user_entry(data: Mapping) -> dict[str, ScramCredential]:
    """Kafka's `{"version":1,"config":{...}}` -> mechanism name -> credential. Keys that are
    not SCRAM mechanisms (a user's quota configs share the node) are skipped."""
    config = data.get("config") if isinstance(data, Mapping) else None
    if not isinstance(config, Mapping):
        raise ScramError('a user entry must look like {"version": 1, "config": {...}}')
    return {
        mech: ScramCredential.from_config(value)
        for mech, value in config.items()
        if mech in MECHANISMS
    }


def user_entry(credentials: Mapping[str, ScramCredential]) -> dict:
    return {"version": 1, "config": {m: c.to_config() for m, c in sorted(credentials.items())}}


class Credentials:
    """In memory, optionally backed by a file (`path`) that is re-read when it changes."""

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path) if path is not None else None
        self._users: dict[str, dict[str, ScramCredential]] = {}
        self._stamp: tuple[int, int] | None = None
        if self.path is not None:
            self._load()  # a broken file at start stops the start (ScramError, OSError)

    def scram(self, user: str, mechanism: str) -> ScramCredential | None:
        self._refresh()
        return self._users.get(user, {}).get(mechanism)

    def users(self) -> dict[str, dict[str, ScramCredential]]:
        self._refresh()
        return {user: dict(entries) for user, entries in self._users.items()}

    def replace(self, user: str, entries: Mapping[str, ScramCredential]) -> None:
        """Set `user`'s credentials to `entries` (none: the user is removed); written to the
        file when there is one (atomically: a reader never sees half a file)."""
        unknown = set(entries) - set(MECHANISMS)
        if unknown:
            raise ScramError(f"unsupported SCRAM mechanism {sorted(unknown)[0]!r}")
        self._refresh()
        if entries:
            self._users[user] = dict(entries)
        else:
            self._users.pop(user, None)
        if self.path is not None:
            self._save()

    def to_json(self) -> dict:
        return {user: user_entry(entries) for user, entries in sorted(self._users.items())}

    # -- the file ------------------------------------------------------------------------
    def _file_stamp(self) -> tuple[int, int] | None:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return None
        return st.st_mtime_ns, st.st_size

    def _load(self) -> None:
        stamp = self._file_stamp()
        data = json.loads(self.path.read_text()) if stamp is not None else {}
        if not isinstance(data, dict):
            raise ScramError(f"{self.path}: expected an object of user name -> entry")
        users = {}
        for user, entry in data.items():
            try:
                users[user] = parse_user_entry(entry)
            except ScramError as exc:
                raise ScramError(f"{self.path}: user {user!r}: {exc}") from None
        self._users, self._stamp = users, stamp

    def _refresh(self) -> None:
        if self.path is None or self._file_stamp() == self._stamp:
            return
        try:
            self._load()
        except (OSError, ValueError, ScramError) as exc:
            # A half-edited file must not lock everyone out: keep what was read last.
            log.error("keeping the SCRAM credentials read before: %s", exc)

    def _save(self) -> None:
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(json.dumps(self.to_json(), indent=2) + "\n")
        os.replace(tmp, self.path)
        self._stamp = self._file_stamp()
