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
import threading
import time
from collections.abc import Iterator
from typing import Protocol

Entry = tuple[dict, dict | None]


class StoreError(Exception):
    """The store could not append or replay (Confluent error 50001)."""


class SchemaStore(Protocol):
    def append(self, key: dict, value: dict | None) -> None:
        """Durably append one entry; raises StoreError."""

    def replay(self) -> Iterator[Entry]:
        """Every entry appended so far, oldest first; raises StoreError."""

    def close(self) -> None: ...


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
        self._entries: list[tuple[bytes, bytes | None]] = []
        self._lock = threading.Lock()

    def append(self, key: dict, value: dict | None) -> None:
        with self._lock:
            self._entries.append((encode(key), encode(value)))

    def replay(self) -> Iterator[Entry]:
        with self._lock:
            entries = list(self._entries)
        for key, value in entries:
            yield decode(key), decode(value)

    def close(self) -> None:
        pass


class KafkaTopicStore:
    """The log kept in a single-partition Kafka topic (``_schemas``) on our broker.

    It speaks only the Kafka protocol through kafka-python, so any Kafka-protocol
    broker serves. One partition keeps one total order of entries; ``acks='all'``
    makes an append durable on every in-sync replica before it returns.
    """

    PARTITION = 0

    def __init__(
        self,
        bootstrap_servers: str | list[str],
        topic: str = "_schemas",
        *,
        timeout_ms: int = 5000,
        init_timeout_ms: int = 60000,
        replication_factor: int = 1,
    ) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.topic = topic
        self.timeout_ms = timeout_ms
        self.init_timeout_ms = init_timeout_ms
        self.replication_factor = replication_factor
        self._producer = None

    def _ensure_topic(self) -> None:
        from kafka import KafkaAdminClient
        from kafka.admin import NewTopic
        from kafka.errors import KafkaError, TopicAlreadyExistsError

        try:
            admin = KafkaAdminClient(
                bootstrap_servers=self.bootstrap_servers,
                request_timeout_ms=self.init_timeout_ms,
                client_id="schema-registry-admin",
            )
        except KafkaError as exc:
            raise StoreError(f"cannot reach {self.bootstrap_servers}: {exc}") from exc
        try:
            if self.topic in admin.list_topics():
                return
            admin.create_topics(
                [NewTopic(self.topic, 1, self.replication_factor)],
                timeout_ms=self.init_timeout_ms,
            )
        except TopicAlreadyExistsError:
            pass  # another registry instance created it first
        except KafkaError as exc:
            raise StoreError(f"cannot create topic {self.topic!r}: {exc}") from exc
        finally:
            admin.close()

    def replay(self) -> Iterator[Entry]:
        from kafka import KafkaConsumer, TopicPartition
        from kafka.errors import KafkaError

        self._ensure_topic()
        partition = TopicPartition(self.topic, self.PARTITION)
        try:
            consumer = KafkaConsumer(
                bootstrap_servers=self.bootstrap_servers,
                group_id=None,
                enable_auto_commit=False,
                client_id="schema-registry-replay",
                request_timeout_ms=max(self.init_timeout_ms, 30000) + 5000,
            )
        except KafkaError as exc:
            raise StoreError(f"cannot reach {self.bootstrap_servers}: {exc}") from exc
        try:
            consumer.assign([partition])
            consumer.seek_to_beginning(partition)
            # Read up to the end offset as of now: everything appended before we
            # started, which is everything, since this registry is the only writer.
            end = consumer.end_offsets([partition])[partition]
            deadline = time.monotonic() + self.init_timeout_ms / 1000
            while consumer.position(partition) < end:
                if time.monotonic() > deadline:
                    raise StoreError(
                        f"replay of {self.topic!r} stopped at offset "
                        f"{consumer.position(partition)} of {end} after {self.init_timeout_ms} ms"
                    )
                batches = consumer.poll(timeout_ms=200)
                for record in batches.get(partition, []):
                    if record.offset >= end:
                        break
                    yield decode(record.key), decode(record.value)
        except KafkaError as exc:
            raise StoreError(f"replay of {self.topic!r} failed: {exc}") from exc
        finally:
            consumer.close()

    def append(self, key: dict, value: dict | None) -> None:
        from kafka import KafkaProducer
        from kafka.errors import KafkaError

        try:
            if self._producer is None:
                self._producer = KafkaProducer(
                    bootstrap_servers=self.bootstrap_servers,
                    acks="all",
                    client_id="schema-registry",
                    # One in flight keeps entries in order even if a send is retried.
                    max_in_flight_requests_per_connection=1,
                )
            future = self._producer.send(
                self.topic, key=encode(key), value=encode(value), partition=self.PARTITION
            )
            future.get(timeout=max(self.timeout_ms, 1) / 1000)
        except KafkaError as exc:
            raise StoreError(f"append to {self.topic!r} failed: {exc}") from exc

    def close(self) -> None:
        if self._producer is not None:
            self._producer.close()
            self._producer = None
