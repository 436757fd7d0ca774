"""Where the registry keeps its log of changes.

The registry's whole state is the replay of an append-only log of keyed JSON
entries, laid out like Confluent's ``_schemas`` topic so the topic reads the same
to anyone who knows that one:

=============== ======================================================== =====================================
keytype         key                                                      value (``None`` = tombstone)
=============== ======================================================== =====================================
SCHEMA          ``{"keytype","subject","version","magic":1}``           ``{"subject","version","id","schema",
                                                                         "deleted"}`` (``schemaType`` if not
                                                                         AVRO); tombstone = permanent delete
CONFIG          ``{"keytype","subject"(null = global),"magic":0}``      ``{"compatibilityLevel"}``;
                                                                         tombstone = config removed
DELETE_SUBJECT  ``{"keytype","subject","magic":0}``                     ``{"subject","version"}``: versions up
                                                                         to ``version`` are soft-deleted
=============== ======================================================== =====================================

A store only appends and replays; it knows nothing of what the entries mean.
``append`` returns once the entry is durable, so the registry (the single
writer) can apply its own write locally right after and serve it at once.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator
from concurrent.futures import TimeoutError as FutureTimeout
from typing import NamedTuple, Protocol

from broker.client.admin import AdminClient, NewTopic
from broker.client.producer import Producer
from broker.client.security import SecurityConfig
from broker.client.simple_consumer import SimpleConsumer
from broker.protocol.errors import ErrorCode, KafkaError, OffsetOutOfRangeError
from broker.util.clock import SECOND_MS
from schemas.registry.fencing import decode_epoch, encode_epoch

log = logging.getLogger(__name__)

Entry = tuple[dict, dict | None]


class Record(NamedTuple):
    """One entry of the log and where it is; ``epoch`` the leader epoch it was written
    at (schemas/registry/fencing.py), None for an entry written without one."""

    offset: int
    key: dict
    value: dict | None
    epoch: int | None = None


class StoreError(Exception):
    """The store could not append or replay (Confluent error 50001)."""


class SchemaStore(Protocol):
    def append(self, key: dict, value: dict | None, epoch: int | None = None) -> int:
        """Durably append one entry (at leader ``epoch``, if given); returns its offset;
        raises StoreError."""

    def start_offset(self) -> int:
        """The offset of the oldest entry kept (compaction may have removed older ones)."""

    def end_offset(self) -> int:
        """The offset the next append will get: everything below it is readable."""

    def read(self, position: int, max_wait_ms: int) -> tuple[list[Record], int]:
        """Entries from ``position`` on (waiting up to ``max_wait_ms`` for one to come),
        and the position after them; raises StoreError."""

    def replay(self) -> Iterator[Entry]:
        """Every entry appended so far, oldest first; raises StoreError."""

    def close(self) -> None: ...


def replay(store: SchemaStore) -> Iterator[Entry]:
    """Every entry below the store's end offset as of now, oldest first."""
    position, end = store.start_offset(), store.end_offset()
    while position < end:
        # A short wait, not 0: a partition leader still loading answers empty.
        records, position = store.read(position, 100)
        for record in records:
            if record.offset < end:
                yield record.key, record.value


def encode(document: dict | None) -> bytes | None:
    return None if document is None else json.dumps(document, separators=(",", ":")).encode()


def decode(raw: bytes | None) -> dict | None:
    return None if raw is None else json.loads(raw)


class InMemoryStore:
    """A process-local log for tests and throwaway registries.

    Entries round-trip through JSON bytes like the Kafka store's, so what works
    here cannot depend on sharing Python objects. One instance can back several
    registries in turn, which is how tests simulate a restart.
    """

    def __init__(self) -> None:
        self._entries: list[tuple[bytes, bytes | None, int | None]] = []
        self._appended = threading.Condition()

    def append(self, key: dict, value: dict | None, epoch: int | None = None) -> int:
        with self._appended:
            self._entries.append((encode(key), encode(value), epoch))
            self._appended.notify_all()
            return len(self._entries) - 1

    def start_offset(self) -> int:
        return 0

    def end_offset(self) -> int:
        with self._appended:
            return len(self._entries)

    def read(self, position: int, max_wait_ms: int) -> tuple[list[Record], int]:
        with self._appended:
            self._appended.wait_for(lambda: len(self._entries) > position, max_wait_ms / SECOND_MS)
            entries = self._entries[position:]
        records = [
            Record(position + i, decode(key), decode(value), epoch)
            for i, (key, value, epoch) in enumerate(entries)
        ]
        return records, position + len(records)

    def replay(self) -> Iterator[Entry]:
        return replay(self)

    def close(self) -> None:
        pass


class KafkaTopicStore:
    """The log kept in a single-partition Kafka topic (``_schemas``) on our broker.

    It goes through our own client library (``broker.client``), so the product
    runs on its own Kafka client: the AdminClient creates the topic with one
    partition if it is missing (one partition keeps one total order of entries),
    compacted (``cleanup.policy=compact``: the broker keeps the latest entry per key),
    the Producer appends with acks=-1 (durable on every in-sync replica before
    ``append`` returns; idempotent, so a retried append is not written twice) and
    the SimpleConsumer replays from the earliest offset to the end offset.
    """

    PARTITION = 0

    def __init__(
        self,
        bootstrap_servers: str | list[str],
        topic: str = "_schemas",
        *,
        timeout_ms: int = 5000,
        init_timeout_ms: int = 60000,
        replication_factor: int = 3,
        security: SecurityConfig | None = None,
    ) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.security = security  # TLS/SASL of every connection (kafkastore.security.*)
        self.topic = topic
        self.timeout_ms = timeout_ms
        self.init_timeout_ms = init_timeout_ms
        self.replication_factor = replication_factor
        self._producer: Producer | None = None
        self._reader: SimpleConsumer | None = None
        self._reader_lock = threading.Lock()
        self._topic_ready = False

    def _ensure_topic(self) -> None:
        if self._topic_ready:
            return
        try:
            with AdminClient(
                self.bootstrap_servers,
                client_id="schema-registry-admin",
                request_timeout_ms=self.init_timeout_ms,
                security=self.security,
            ) as admin:
                if self.topic not in admin.list_topics():
                    live = len(admin.cluster.brokers) or 1
                    factor = min(self.replication_factor, live)
                    if factor < self.replication_factor:
                        log.warning(
                            "creating %s with replication factor %d: only %d live brokers "
                            "(kafkastore.topic.replication.factor is %d)",
                            self.topic, factor, live, self.replication_factor,
                        )  # fmt: skip
                    # Compacted, as Confluent creates it: the latest entry per key is
                    # all a replay needs (keys are per subject/version, config, subject).
                    topic = NewTopic(self.topic, 1, factor, configs={"cleanup.policy": "compact"})
                    outcome = admin.create_topics([topic], timeout_ms=self.init_timeout_ms)
                    # TOPIC_ALREADY_EXISTS: another registry instance created it first.
                    code = outcome.get(self.topic, ErrorCode.NONE)
                    if code not in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS):
                        detail = admin.last_errors.get(self.topic, (code, None))[1]
                        raise StoreError(
                            f"cannot create topic {self.topic!r}: {code.name} {detail or ''}"
                        )
        except (KafkaError, ValueError) as exc:
            raise StoreError(f"cannot reach {self.bootstrap_servers}: {exc}") from exc
        self._topic_ready = True

    def _consumer(self) -> SimpleConsumer:
        """The reader's consumer; callers hold ``_reader_lock`` (one request at a time on
        its connections)."""
        self._ensure_topic()
        if self._reader is None:
            try:
                self._reader = SimpleConsumer(
                    self.bootstrap_servers,
                    client_id="schema-registry-reader",
                    timeout_s=self.init_timeout_ms / SECOND_MS,
                    security=self.security,
                )
            except KafkaError as exc:
                raise StoreError(f"cannot reach {self.bootstrap_servers}: {exc}") from exc
        return self._reader

    def start_offset(self) -> int:
        try:
            with self._reader_lock:
                return self._consumer().earliest_offset(self.topic, self.PARTITION)
        except KafkaError as exc:
            raise StoreError(f"cannot read {self.topic!r}: {exc}") from exc

    def end_offset(self) -> int:
        try:
            with self._reader_lock:
                return self._consumer().latest_offset(self.topic, self.PARTITION)
        except KafkaError as exc:
            raise StoreError(f"cannot read {self.topic!r}: {exc}") from exc

    def read(self, position: int, max_wait_ms: int) -> tuple[list[Record], int]:
        with self._reader_lock:
            return self._read(position, max_wait_ms)

    def _read(self, position: int, max_wait_ms: int) -> tuple[list[Record], int]:
        consumer = self._consumer()
        try:
            try:
                result = consumer.fetch(
                    self.topic,
                    self.PARTITION,
                    position,
                    max_bytes=1 << 20,
                    max_wait_ms=max_wait_ms,
                    min_bytes=1,
                )
            except OffsetOutOfRangeError:
                # Compaction removed what was below the log start: nothing there to read.
                start = consumer.earliest_offset(self.topic, self.PARTITION)
                if start <= position:
                    raise
                return [], start
        except KafkaError as exc:
            raise StoreError(f"read of {self.topic!r} at offset {position} failed: {exc}") from exc
        records = []
        for r in result.records():
            if r.offset < position:
                continue
            try:
                epoch = decode_epoch(r.headers)
                records.append(Record(r.offset, decode(r.key), decode(r.value), epoch))
            except ValueError as exc:  # not written by a registry: skipped, and said so
                log.error(
                    "skipping offset %d of %s: not a JSON entry (%s)", r.offset, self.topic, exc
                )
        return records, max(position, result.next_offset)

    def replay(self) -> Iterator[Entry]:
        return replay(self)

    def append(self, key: dict, value: dict | None, epoch: int | None = None) -> int:
        try:
            self._ensure_topic()
            if self._producer is None:
                self._producer = Producer(
                    self.bootstrap_servers,
                    acks=-1,
                    linger_ms=0,  # the registry waits for each append: nothing to batch
                    client_id="schema-registry",
                    request_timeout_ms=self.timeout_ms,
                    delivery_timeout_ms=self.timeout_ms,
                    max_block_ms=self.timeout_ms,
                    security=self.security,
                )
            future = self._producer.send(
                self.topic,
                encode(value),
                key=encode(key),
                partition=self.PARTITION,
                headers=encode_epoch(epoch) or None,
            )
            return future.result(timeout=max(self.timeout_ms, 1) / SECOND_MS).offset
        except FutureTimeout as exc:
            raise StoreError(
                f"append to {self.topic!r} not acknowledged within {self.timeout_ms} ms"
            ) from exc
        except KafkaError as exc:
            raise StoreError(f"append to {self.topic!r} failed: {exc}") from exc

    def close(self) -> None:
        if self._producer is not None:
            self._producer.close(self.timeout_ms / SECOND_MS)
            self._producer = None
        if self._reader is not None:
            self._reader.close()
            self._reader = None
