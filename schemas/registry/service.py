"""The registry's writes: validate, check, append to the store, read back.

Of all the instances sharing a store, one writes: the leader (election.py elects it;
a registry started alone leads on its own). It appends each change under one lock and
answers once its own reader has applied the entry, so ids and versions are handed out
in store order and a client reads its own write as soon as its request returns.

The state changes only through the reader: ``advance`` reads the store from
``position`` and applies what it finds, for the leader's own writes and for every
instance following the leader's (a tail thread, ``start_tailing``). A new leader reads
up to the store's end offset before its first write, so the ids it hands out follow
the highest id any earlier leader used. Reads go straight to ``state``.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from broker.util.clock import SECOND_MS
from schemas import canonical, compatibility
from schemas.compatibility import Level
from schemas.registry import errors
from schemas.registry.election import Identity
from schemas.registry.fencing import Fence, marker_key, marker_value
from schemas.registry.state import (
    Mode,
    RegistryState,
    config_key,
    delete_subject_key,
    id_watermark_key,
    mode_key,
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
    # How long one read of the tail thread waits for new entries, in ms.
    TAIL_WAIT_MS = 200

    def __init__(
        self,
        store: SchemaStore,
        default_level: Level = Level.BACKWARD,
        *,
        timeout_ms: int = 5 * SECOND_MS,
        identity: Identity | None = None,
    ) -> None:
        """``identity`` (this instance's) makes the registry one of
        several: it writes only while the election names it leader. Without one it
        leads alone."""
        self.store = store
        self.state = RegistryState(default_level)
        self.timeout_s = timeout_ms / SECOND_MS
        self.identity = identity
        self.leader = None  # the elected leader's identity (None: unknown, or alone)
        self.position = 0  # the next store offset to apply
        self._reading = threading.Lock()  # one read of the store at a time
        self._applied = threading.Condition()  # notified when ``position`` moves
        self._write_lock = threading.Lock()
        self._caught_up = False  # this leadership read the store to its end
        # Fencing (fencing.py), with several instances: the epoch this leadership writes
        # at once its marker is admitted (None: not yet), and whether a newer leader's
        # marker or a dropped write of ours showed it was superseded.
        self.fence = Fence()
        self._epoch: int | None = None
        self._nonce = ""
        self._superseded = False
        self._generation: int | None = None
        self._dropped: set[int] = set()  # offsets of entries the fence dropped (recent)
        self._closed = threading.Event()
        self._tail: threading.Thread | None = None

    # -- reading the store --------------------------------------------------------

    def load(self, timeout_ms: int | None = None) -> int:
        """Replay the store into the state; returns how many entries were read."""
        with self._reading:
            self.position = self._store(self.store.start_offset)
        before = self.position
        self.wait_for(self._store(self.store.end_offset), timeout_ms)
        log.info(
            "replayed offsets %d..%d: %d subjects",
            before,
            self.position,
            len(self.state.subjects(deleted=True)),
        )
        return self.position - before

    def advance(self, max_wait_ms: int) -> None:
        """One read of the store from ``position``, applied (the caller holds ``_reading``)."""
        records, position = self._store(self.store.read, self.position, max_wait_ms)
        for record in records:
            try:
                if not self._admit(record):
                    continue
                self.state.apply(record.key, record.value)
            except (ValueError, KeyError, TypeError, AttributeError) as exc:
                # An entry no registry wrote (or a newer layout): skipped, named, and the
                # rest of the store still read, so one bad record stops no instance.
                log.error("skipping store entry at offset %d: %r -> %r (%s)",
                          record.offset, record.key, record.value, exc)  # fmt: skip
        with self._applied:
            self.position = position
            self._applied.notify_all()

    def wait_for(self, position: int, timeout_ms: int | None = None) -> None:
        """Return once every entry below ``position`` is applied; 50002 past the timeout.
        With a tail thread running, it reads (waking on each new entry) and this waits;
        without one, this reads."""
        timeout_s = self.timeout_s if timeout_ms is None else timeout_ms / SECOND_MS
        deadline = time.monotonic() + timeout_s
        while True:
            with self._applied:
                if self.position >= position:
                    return
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise errors.timed_out(
                        f"the store was read up to offset {self.position}, not {position}, "
                        f"within {int(timeout_s * SECOND_MS)} ms"
                    )
                if self._tail is not None:
                    self._applied.wait(remaining)
                    continue
            with self._reading:
                if self.position < position:
                    self.advance(100)

    def start_tailing(self) -> None:
        """Follow the store in a thread, so others' writes show up here (several instances)."""
        self._tail = threading.Thread(target=self._follow, name="registry-tail", daemon=True)
        self._tail.start()

    def _follow(self) -> None:
        while not self._closed.is_set():
            try:
                with self._reading:
                    self.advance(self.TAIL_WAIT_MS)
            except errors.RegistryError as exc:
                log.warning("reading the store failed, trying again: %s", exc.message)
                self._closed.wait(1.0)

    def close(self) -> None:
        self._closed.set()
        if self._tail is not None:
            self._tail.join(timeout=5)

    def _admit(self, record) -> bool:
        """Whether a read entry counts (fencing.py); notes when this leader was superseded."""
        if self.identity is None:
            return True  # alone: nobody to be fenced by
        admitted = self.fence.admit(record.offset, record.key, record.value, record.epoch)
        if not admitted:
            if len(self._dropped) > 1000:
                self._dropped.clear()  # only the last write's offset is ever asked about
            self._dropped.add(record.offset)
        elif self._epoch is not None and self.fence.current.nonce != self._nonce:
            log.warning(
                "leader epoch %d of %s supersedes this instance's epoch %d: it stops writing",
                self.fence.epoch, self.fence.current.leader, self._epoch,
            )  # fmt: skip
            self._superseded = True
        return admitted

    @staticmethod
    def _store(call, *args):
        try:
            return call(*args)
        except StoreError as exc:
            raise errors.store_error(str(exc)) from None

    # -- leadership -----------------------------------------------------------------

    @property
    def leading(self) -> bool:
        return self.identity is None or self.leader == self.identity

    def set_leader(self, leader: Identity | None, generation: int | None = None) -> None:
        """What the election decided (None: no leader now), in group ``generation``. Taken
        under the write lock, so a write under way finishes before this instance stops or
        starts leading. Only here does a leadership start: an instance whose writes were
        fenced writes no new marker until the election names it again."""
        with self._write_lock:
            if leader != self.leader:
                log.info("leader: %s (this instance: %s)", leader, self.identity)
            self.leader = leader
            self._generation = generation
            self._caught_up = False
            self._epoch = None
            self._superseded = False

    def write_target(self) -> Identity | None:
        """Where a write goes: None for here, else the leader's identity; 50004 if none."""
        if self.leading:
            return None
        leader = self.leader
        if leader is None:
            raise errors.unknown_leader("no leader is elected at the moment; try again")
        return leader

    @contextmanager
    def _writing(self) -> Iterator[None]:
        with self._write_lock:
            if not self.leading:
                raise errors.unknown_leader("this instance stopped leading; try again")
            if self._superseded:
                raise errors.unknown_leader(
                    f"this instance was fenced by leader epoch {self.fence.epoch} of "
                    f"{self.fence.current.leader}; try again"
                )
            if not self._caught_up:
                # Everything earlier leaders wrote is read before this one allocates an id.
                self.wait_for(self._store(self.store.end_offset))
                self._caught_up = True
            if self.identity is not None and self._epoch is None:
                self._take_epoch()
            for key, value in self.fence.take_repairs():
                # A superseded leader's entry shadows this key: the admitted value again,
                # so compaction keeps it (fencing.py).
                self._write(key, value)
            yield

    def _take_epoch(self) -> None:
        """Append this leadership's marker (one above the highest epoch read) until one is
        admitted. A void marker (another new leader's came first with the same epoch) is
        tried again from the newer log, a few times; one admitted and then superseded
        means a newer leader: this one stops."""
        for _ in range(3):
            nonce = uuid.uuid4().hex
            value = marker_value(self.fence.epoch + 1, nonce, self.identity.url, self._generation)
            self._nonce = nonce  # before the read: our own marker must not look like another's
            offset = self._store(self.store.append, marker_key(nonce), value)
            self.wait_for(offset + 1)
            if self.fence.current.nonce == nonce:
                self._epoch = value["epoch"]
                log.info("leading at leader epoch %d (generation %s)", self._epoch,
                         self._generation)  # fmt: skip
                return
            if offset not in self._dropped:
                # Admitted, then a newer leader's marker: that one was elected after us.
                self._superseded = True
                break
        raise errors.unknown_leader("another instance took the leadership meanwhile; try again")

    def _write(self, key: dict, value: dict | None) -> None:
        epoch = () if self._epoch is None else (self._epoch,)  # alone: stores as before
        offset = self._store(self.store.append, key, value, *epoch)
        self.wait_for(offset + 1)
        if offset in self._dropped:
            self._superseded = True
            raise errors.unknown_leader(
                f"this write was fenced: leader epoch {self.fence.epoch} of "
                f"{self.fence.current.leader} supersedes this instance's {self._epoch}; "
                "try again"
            )

    def _keep_highest_id(self) -> None:
        """Before a permanent delete: once compaction drops the deleted entries, this
        entry still tells a replay the highest id ever handed out, so it is never reused."""
        self._write(id_watermark_key(), {"max_id": self.state.next_id() - 1})

    # -- writes ---------------------------------------------------------------------

    def _check_writable(self, subject: str) -> Mode:
        mode = self.state.mode_for(subject)
        if mode == Mode.READONLY:
            raise errors.not_permitted(f"Subject {subject} is in read-only mode")
        return mode

    def register(
        self,
        subject: str,
        schema: canonical.ParsedSchema,
        schema_id: int | None = None,
        version: int | None = None,
    ) -> int:
        """The id of ``schema`` under ``subject``, registering a new version if needed.
        ``schema_id`` and ``version`` (IMPORT mode only) are the caller's."""
        with self._writing():
            mode = self._check_writable(subject)
            if (schema_id is not None or version is not None) and mode != Mode.IMPORT:
                raise errors.not_permitted(
                    f"Subject {subject} is not in import mode: ids and versions are the registry's"
                )
            history = self.state.all_versions(subject)
            live = [v for v in history if not v.deleted]
            for entry in live:
                if entry.schema.canonical == schema.canonical:
                    if schema_id is not None and entry.id != schema_id:
                        raise errors.not_permitted(
                            f"Schema already registered with id {entry.id} instead of {schema_id}"
                        )
                    return entry.id
            if mode != Mode.IMPORT:  # an import copies history as it was, checked or not
                level = self.state.level_for(subject)
                details = compatibility.problems(level, schema, [v.schema for v in live])
                if details:
                    raise errors.incompatible(subject, details)
            known = self.state.id_for(schema)
            if schema_id is None:
                schema_id = known if known is not None else self.state.next_id()
            elif known is not None and known != schema_id:
                raise errors.not_permitted(
                    f"Schema already registered with id {known} instead of {schema_id}"
                )
            elif known is None and self.state.id_in_use(schema_id):
                raise errors.not_permitted(
                    f"Overwrite new schema with id {schema_id} is not permitted."
                )
            # The same schema under another subject: one id, one stored text.
            text = schema.text if known is None else self.state.schema(known).text
            number = version if version is not None else (history[-1].version if history else 0) + 1
            if any(v.version == number for v in history):
                raise errors.not_permitted(f"Subject {subject} already has a version {number}")
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
        with self._writing():
            self._check_writable(subject)
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
            self._keep_highest_id()
            for entry in history:
                self._write(schema_key(subject, entry.version), None)
            if self.state.subject_level(subject) is not None:
                self._write(config_key(subject), None)
            return [v.version for v in history]

    def delete_version(self, subject: str, version: object, permanent: bool) -> int:
        with self._writing():
            self._check_writable(subject)
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
                self._keep_highest_id()
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
        with self._writing():
            self._write(config_key(subject), {"compatibilityLevel": level.value})
            return level

    def delete_level(self, subject: str | None) -> Level:
        """Remove a level (the subject's, or the stored global one); returns what it was."""
        with self._writing():
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

    def set_mode(self, subject: str | None, mode: Mode, force: bool = False) -> Mode:
        """IMPORT only where no schema was ever registered (hard deletes aside), unless
        ``force``: imported ids must not meet ids handed out here."""
        with self._writing():
            if mode == Mode.IMPORT and not force and self.state.has_schemas(subject):
                where = "the registry" if subject is None else f"subject {subject}"
                raise errors.not_permitted(
                    f"Cannot import since {where} already has schemas (force=true overrides)"
                )
            self._write(mode_key(subject), {"mode": mode.value})
            return mode

    def delete_mode(self, subject: str) -> Mode:
        """Remove a subject's mode (it follows the global one again); returns what it was."""
        with self._writing():
            previous = self.state.subject_mode(subject)
            if previous is None:
                raise errors.subject_not_found(subject)
            self._write(mode_key(subject), None)
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
