"""The registry's writes: validate, check, append to the store, apply.

The registry is the single writer of its store. Every change is appended (and
acknowledged by the store) before it is applied to the in-memory state, under one
lock, so ids and versions are handed out in store order and a client reads its
own write as soon as its request returns. Reads go straight to ``state``.
"""

from __future__ import annotations

import logging
import threading

from schemas import canonical, compatibility
from schemas.compatibility import Level
from schemas.registry import errors
from schemas.registry.state import (
    RegistryState,
    config_key,
    delete_subject_key,
    parse_version,
    schema_key,
)
from schemas.store import SchemaStore, StoreError

log = logging.getLogger(__name__)

SCHEMA_TYPES = ("AVRO",)


def parse_schema(text: object, schema_type: object = None) -> canonical.ParsedSchema:
    """Schema text from a request, validated; raises 42201."""
    if schema_type not in (None, "AVRO"):
        raise errors.invalid_schema(
            f"unsupported schema type {schema_type!r}; this registry serves AVRO"
        )
    try:
        return canonical.parse(text)
    except canonical.InvalidSchema as exc:
        raise errors.invalid_schema(str(exc)) from None


def parse_level(text: object) -> Level:
    try:
        return Level.parse(text)
    except ValueError:
        raise errors.invalid_compatibility_level(text) from None


class Registry:
    def __init__(self, store: SchemaStore, default_level: Level = Level.BACKWARD) -> None:
        self.store = store
        self.state = RegistryState(default_level)
        self._write_lock = threading.Lock()

    def load(self) -> int:
        """Replay the store into the state; returns how many entries were read."""
        count = 0
        for key, value in self.store.replay():
            self.state.apply(key, value)
            count += 1
        log.info("replayed %d entries: %d subjects", count, len(self.state.subjects(deleted=True)))
        return count

    def _write(self, key: dict, value: dict | None) -> None:
        try:
            self.store.append(key, value)
        except StoreError as exc:
            raise errors.store_error(str(exc)) from None
        self.state.apply(key, value)

    def register(self, subject: str, schema: canonical.ParsedSchema) -> int:
        """The id of ``schema`` under ``subject``, registering a new version if needed."""
        with self._write_lock:
            history = self.state.all_versions(subject)
            live = [v for v in history if not v.deleted]
            for entry in live:
                if entry.schema.canonical == schema.canonical:
                    return entry.id
            level = self.state.level_for(subject)
            details = compatibility.problems(level, schema, [v.schema for v in live])
            if details:
                raise errors.incompatible(subject, details)
            schema_id = self.state.id_for(schema)
            if schema_id is None:
                schema_id = self.state.next_id()
                text = schema.text
            else:
                # The same schema under another subject: one id, one stored text.
                text = self.state.schema(schema_id).text
            number = (history[-1].version if history else 0) + 1
            value = {
                "subject": subject,
                "version": number,
                "id": schema_id,
                "schema": text,
                "deleted": False,
            }
            self._write(schema_key(subject, number), value)
            log.info("registered %s version %d as id %d", subject, number, schema_id)
            return schema_id

    def delete_subject(self, subject: str, permanent: bool) -> list[int]:
        with self._write_lock:
            history = self.state.all_versions(subject)
            if not history:
                raise errors.subject_not_found(subject)
            live = [v for v in history if not v.deleted]
            if not permanent:
                if not live:
                    raise errors.subject_soft_deleted(subject)
                self._write(
                    delete_subject_key(subject),
                    {"subject": subject, "version": history[-1].version},
                )
                return [v.version for v in live]
            if live:
                raise errors.subject_not_soft_deleted(subject)
            for entry in history:
                self._write(schema_key(subject, entry.version), None)
            if self.state.subject_level(subject) is not None:
                self._write(config_key(subject), None)
            return [v.version for v in history]

    def delete_version(self, subject: str, version: object, permanent: bool) -> int:
        with self._write_lock:
            number = parse_version(version)
            history = self.state.all_versions(subject)
            if not history:
                raise errors.subject_not_found(subject)
            if number is None:
                live = [v for v in history if not v.deleted]
                if not live:
                    raise errors.subject_not_found(subject)
                # "latest" names the newest live version, for soft and hard deletes alike.
                number = live[-1].version
            entry = next((v for v in history if v.version == number), None)
            if entry is None:
                raise errors.version_not_found(number)
            if permanent:
                if not entry.deleted:
                    raise errors.version_not_soft_deleted(subject, number)
                self._write(schema_key(subject, number), None)
            else:
                if entry.deleted:
                    raise errors.version_soft_deleted(subject, number)
                value = {
                    "subject": subject,
                    "version": number,
                    "id": entry.id,
                    "schema": entry.schema.text,
                    "deleted": True,
                }
                self._write(schema_key(subject, number), value)
            return number

    def set_level(self, subject: str | None, level: Level) -> Level:
        with self._write_lock:
            self._write(config_key(subject), {"compatibilityLevel": level.value})
            return level

    def delete_level(self, subject: str | None) -> Level:
        """Remove a level (the subject's, or the stored global one); returns what it was."""
        with self._write_lock:
            if subject is None:
                previous = self.state.global_level()
            else:
                found = self.state.subject_level(subject)
                if found is None:
                    if not self.state.all_versions(subject):
                        raise errors.subject_not_found(subject)
                    raise errors.subject_config_not_found(subject)
                previous = found
            self._write(config_key(subject), None)
            return previous

    def check(
        self, subject: str, version: object | None, schema: canonical.ParsedSchema
    ) -> list[str]:
        """Why ``schema`` may not be registered after ``version`` of ``subject`` (all live
        versions when ``version`` is None), under the subject's level."""
        level = self.state.level_for(subject)
        if version is None:
            try:
                existing = [v.schema for v in self.state.versions(subject)]
            except errors.RegistryError:
                return []
            return compatibility.problems(level, schema, existing)
        target = self.state.version(subject, version)
        return compatibility.problems(level, schema, [target.schema])
