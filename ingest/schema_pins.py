"""The registry as one run sees it: each decoded topic's target schema, pinned by the driver.

A decoder reads a topic into the latest version of the topic's subject. Asked by every
task, that answer could change while a run's tasks start (a version registered mid-run),
so the tasks of one run -- even of one hour -- could write different schemas; and every
task would pay a registry round trip, and the HTTP client's import (~0.25 s in a fresh
Spark Python worker), before its first record. The driver asks once when it plans and
ships the answers with the tasks (`SchemaPins`, inside TaskSettings). A task's
`PinnedRegistry` answers from them and goes to the registry only for what was not
pinned -- a writer schema id other than the latest, a subject the driver did not find --
through a client made on first use.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass, field

from schemas.client import RegisteredSchema, RegistryClient, RegistryError, RegistrySettings


@dataclass(frozen=True)
class SchemaPins:
    """Subject -> its latest version when the run was planned. Picklable."""

    latest: dict[str, RegisteredSchema] = field(default_factory=dict)

    @classmethod
    def resolve(cls, registry: RegistryClient, subjects: Iterable[str]) -> SchemaPins:
        """The latest version of each subject. A subject the registry does not know is
        left unpinned: the task meets the same answer and reports it as it always has.
        Other failures (the registry down) raise, as they would fail every task."""
        latest = {}
        for subject in sorted(set(subjects)):
            try:
                # Not registry.latest: that answer may be cached for a while.
                latest[subject] = registry.version(subject, "latest")
            except RegistryError as exc:
                if exc.status != 404:
                    raise
        return cls(latest)


class PinnedRegistry:
    """What decoders ask of a registry (`latest`, `schema`), answered from the run's pins
    first. Thread-safe, as RegistryClient is."""

    def __init__(self, settings: RegistrySettings, pins: SchemaPins) -> None:
        self.settings = settings
        self.pins = pins
        self._by_id = {found.id: found.schema for found in pins.latest.values()}
        self._client: RegistryClient | None = None
        self._lock = threading.Lock()

    @property
    def client(self) -> RegistryClient:
        with self._lock:
            if self._client is None:
                self._client = self.settings.client()
            return self._client

    def latest(self, subject: str) -> RegisteredSchema:
        pinned = self.pins.latest.get(subject)
        return pinned if pinned is not None else self.client.latest(subject)

    def schema(self, schema_id: int) -> str:
        pinned = self._by_id.get(schema_id)
        return pinned if pinned is not None else self.client.schema(schema_id)

    @property
    def contacted(self) -> bool:
        """Whether a question went past the pins to the registry."""
        return self._client is not None

    def close(self) -> None:
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None
