"""The registry's in-memory model: what replaying the store's entries produces.

``apply`` is the only way the model changes, both while replaying at start and
after each acknowledged append, so a restarted registry rebuilds exactly the
state it served before. Queries raise the Confluent errors for what is missing.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, replace

from schemas import canonical
from schemas.compatibility import Level
from schemas.registry import errors
from schemas.registry.errors import MAX_VERSION


@dataclass(frozen=True)
class Version:
    subject: str
    version: int
    id: int
    schema: canonical.ParsedSchema
    deleted: bool

    def body(self) -> dict:
        """The JSON Confluent returns for one subject version."""
        return {
            "subject": self.subject,
            "version": self.version,
            "id": self.id,
            "schema": self.schema.text,
        }


def schema_key(subject: str, version: int) -> dict:
    return {"keytype": "SCHEMA", "subject": subject, "version": version, "magic": 1}


def config_key(subject: str | None) -> dict:
    return {"keytype": "CONFIG", "subject": subject, "magic": 0}


def delete_subject_key(subject: str) -> dict:
    return {"keytype": "DELETE_SUBJECT", "subject": subject, "magic": 0}


def parse_version(text: object) -> int | None:
    """A version path segment: a number in [1, 2^31-1], or None for latest; raises 42202."""
    if isinstance(text, str) and text.strip().lower() == "latest":
        return None
    try:
        number = int(str(text))
    except ValueError:
        raise errors.invalid_version(text) from None
    if number == -1:
        return None
    if not 1 <= number <= MAX_VERSION:
        raise errors.invalid_version(text)
    return number


class RegistryState:
    def __init__(self, default_level: Level) -> None:
        self.default_level = default_level
        self._subjects: dict[str, dict[int, Version]] = {}
        self._by_id: dict[int, canonical.ParsedSchema] = {}
        self._id_by_canonical: dict[str, int] = {}
        self._configs: dict[str | None, Level] = {}
        self._max_id = 0
        self._parsed: dict[str, canonical.ParsedSchema] = {}
        self._lock = threading.RLock()

    # -- replay -----------------------------------------------------------------

    def apply(self, key: dict, value: dict | None) -> None:
        """Fold one store entry into the model. Unknown key types are skipped, as
        Confluent skips NOOP and other entries it has no use for."""
        with self._lock:
            keytype = key.get("keytype")
            if keytype == "SCHEMA":
                self._apply_schema(key, value)
            elif keytype == "CONFIG":
                if value is None:
                    self._configs.pop(key.get("subject"), None)
                else:
                    self._configs[key.get("subject")] = Level.parse(value["compatibilityLevel"])
            elif keytype == "DELETE_SUBJECT" and value is not None:
                versions = self._subjects.get(key["subject"], {})
                for number, entry in list(versions.items()):
                    if number <= value["version"] and not entry.deleted:
                        versions[number] = replace(entry, deleted=True)

    def _apply_schema(self, key: dict, value: dict | None) -> None:
        subject, number = key["subject"], key["version"]
        versions = self._subjects.setdefault(subject, {})
        if value is None:
            gone = versions.pop(number, None)
            if not versions:
                del self._subjects[subject]
            if gone is not None and not self._id_in_use(gone.id):
                # A hard delete removes the id too (ids are never reused: _max_id stays).
                del self._by_id[gone.id]
                self._id_by_canonical.pop(gone.schema.canonical, None)
            return
        parsed = self._parse(value["schema"])
        schema_id = value["id"]
        versions[number] = Version(subject, number, schema_id, parsed, bool(value.get("deleted")))
        self._by_id.setdefault(schema_id, parsed)
        self._id_by_canonical.setdefault(parsed.canonical, schema_id)
        self._max_id = max(self._max_id, schema_id)

    def _parse(self, text: str) -> canonical.ParsedSchema:
        parsed = self._parsed.get(text)
        if parsed is None:
            parsed = self._parsed[text] = canonical.parse(text)
        return parsed

    def _id_in_use(self, schema_id: int) -> bool:
        return any(v.id == schema_id for vs in self._subjects.values() for v in vs.values())

    # -- queries ----------------------------------------------------------------

    def subjects(self, deleted: bool = False) -> list[str]:
        with self._lock:
            return sorted(
                s
                for s, vs in self._subjects.items()
                if deleted or any(not v.deleted for v in vs.values())
            )

    def counts(self) -> tuple[int, int, int]:
        """(live subjects, live versions, schema ids in use): what the metrics report."""
        with self._lock:
            live = [v for vs in self._subjects.values() for v in vs.values() if not v.deleted]
            subjects = sum(
                1 for vs in self._subjects.values() if any(not v.deleted for v in vs.values())
            )
            return subjects, len(live), len({v.id for v in live})

    def versions(self, subject: str, deleted: bool = False) -> list[Version]:
        """The subject's versions, oldest first; 40401 if there are none to show."""
        with self._lock:
            found = [
                v
                for _, v in sorted(self._subjects.get(subject, {}).items())
                if deleted or not v.deleted
            ]
        if not found:
            raise errors.subject_not_found(subject)
        return found

    def all_versions(self, subject: str) -> list[Version]:
        """Every version, soft-deleted ones included; empty for an unknown subject."""
        with self._lock:
            return [v for _, v in sorted(self._subjects.get(subject, {}).items())]

    def version(self, subject: str, version: object, deleted: bool = False) -> Version:
        number = parse_version(version)
        live = self.versions(subject, deleted=deleted)
        if number is None:
            return live[-1]
        for entry in live:
            if entry.version == number:
                return entry
        raise errors.version_not_found(number)

    def schema(self, schema_id: int) -> canonical.ParsedSchema:
        with self._lock:
            found = self._by_id.get(schema_id)
        if found is None:
            raise errors.schema_not_found(schema_id)
        return found

    def usages(self, schema_id: int, deleted: bool = False) -> list[Version]:
        """Every subject version registered with ``schema_id``; 40403 if the id is unknown."""
        self.schema(schema_id)
        with self._lock:
            return sorted(
                (
                    v
                    for vs in self._subjects.values()
                    for v in vs.values()
                    if v.id == schema_id and (deleted or not v.deleted)
                ),
                key=lambda v: (v.subject, v.version),
            )

    def lookup(
        self, subject: str, schema: canonical.ParsedSchema, deleted: bool = False
    ) -> Version:
        """The version of ``subject`` holding ``schema``: 40401 / 40403 when there is none."""
        for entry in reversed(self.versions(subject, deleted=deleted)):
            if entry.schema.canonical == schema.canonical:
                return entry
        raise errors.schema_not_found()

    def id_for(self, schema: canonical.ParsedSchema) -> int | None:
        """The global id already given to this schema under any subject."""
        with self._lock:
            return self._id_by_canonical.get(schema.canonical)

    def next_id(self) -> int:
        with self._lock:
            return self._max_id + 1

    def subject_level(self, subject: str) -> Level | None:
        with self._lock:
            return self._configs.get(subject)

    def global_level(self) -> Level:
        with self._lock:
            return self._configs.get(None, self.default_level)

    def level_for(self, subject: str) -> Level:
        return self.subject_level(subject) or self.global_level()
