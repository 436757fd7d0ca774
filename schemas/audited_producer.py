"""The audited producer: our Producer plus the audit counts of docs/contracts/audit.md.

Every record gets a CreateTime timestamp (the caller's, or now) and falls in the
event-time window ``[start, start + window_ms)`` with ``start =
window_start(timestamp, window_ms)`` (schemas/windows.py: aligned to the epoch, so
UTC; the load's audit uses the same function). A record is counted only
once its delivery succeeded: the loader can only ever see delivered records, so a
failed send must not raise the producer's count above the loader's.

Counts are published as AuditEvent records (Avro, Confluent framing, subject
``<audit_topic>-value``) to the audit topic, one per (topic, window) from this
producer's host:

- when the window closes: the wall clock is past the window's end plus
  ``grace_ms`` (a background thread looks every ``emit_interval_s``);
- at ``flush()`` and ``close()``, for every window with unpublished counts, so a
  clean shutdown loses no count.

Events are additive. Records delivered for a window after its event went out
(late sends, or deliveries that took longer than the grace) are published in a
further event for the same window, so whoever reads the audit topic must SUM
``count`` per (topic, window_start_ms) over all events (and hosts). An audit event
that fails to be delivered puts its count back, to go out with the next
publication; one that fails after the broker may have appended it (a delivery
timeout) can therefore be counted twice: audit events are at least once.
"""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

from broker.client.producer import Producer
from broker.protocol.errors import RequestTimedOutError
from broker.util.clock import MINUTE_MS, SECOND_MS
from schemas import catalog
from schemas.client import RegistryClient
from schemas.serde import AvroSerializer
from schemas.windows import DEFAULT_AUDIT_WINDOW_MS, window_start

log = logging.getLogger(__name__)

AUDIT_SCHEMA = catalog.load_str("AuditEvent")
TIER = "producer"

WindowKey = tuple[str, int]  # (topic, window_start_ms)


class AuditPublishError(Exception):
    """Audit events could not be published; their counts wait for the next flush."""


class DeliveryTally:
    """Records in flight, and delivered-but-unpublished counts per (topic, window_start_ms).

    ``track`` is the hot path: one append to a deque (thread-safe, no lock).
    ``settle`` later walks the records whose outcome is known and counts the
    delivered ones per window, merging them under one lock per walk, so the
    per-record cost stays off both the caller's thread and the producer's sender
    thread (a done-callback per record would make every future take the slow
    resolution path in the sender).
    """

    def __init__(self) -> None:
        self._inflight: deque[tuple[WindowKey, Future]] = deque()
        self.track = self._inflight.append
        self._lock = threading.Lock()
        self._counts: dict[WindowKey, int] = {}

    def in_flight(self) -> int:
        return len(self._inflight)

    def settle(self) -> None:
        """Count every tracked record that was delivered; keep those still in flight."""
        delivered: dict[WindowKey, int] = {}
        inflight = self._inflight
        for _ in range(len(inflight)):  # records tracked meanwhile wait for the next walk
            window, future = inflight.popleft()
            try:
                failed = future.exception(0) is not None
            except FutureTimeout:
                inflight.append((window, future))
                continue
            if not failed:
                delivered[window] = delivered.get(window, 0) + 1
        with self._lock:
            for window, n in delivered.items():
                self._counts[window] = self._counts.get(window, 0) + n

    def add(self, window: WindowKey, n: int) -> None:
        with self._lock:
            self._counts[window] = self._counts.get(window, 0) + n

    def take(self, closed_before_ms: int | None = None, window_ms: int = 0) -> dict[WindowKey, int]:
        """Remove and return the counts of windows ending at or before ``closed_before_ms``
        (of every window when None)."""
        with self._lock:
            if closed_before_ms is None:
                taken, self._counts = self._counts, {}
                return taken
            taken = {w: n for w, n in self._counts.items() if w[1] + window_ms <= closed_before_ms}
            for window in taken:
                del self._counts[window]
            return taken


class AuditedProducer:
    """A Producer that counts what it delivers and publishes the counts; see the module docstring.

    ``producer_kwargs`` configure the producer of the caller's records (``.producer``).
    Audit events go through a producer of their own with acks=-1 and idempotence,
    whatever the caller chose for their records, and are never counted themselves.
    With ``emit_interval_s=None`` there is no emitter thread: call
    ``publish_closed_windows()`` (or ``flush()``) regularly, since records in flight
    are only settled then.
    """

    def __init__(
        self,
        bootstrap_servers: str | list[str],
        *,
        registry: RegistryClient | str,
        service: str,
        host: str | None = None,
        audit_topic: str = "_audit",
        window_ms: int = DEFAULT_AUDIT_WINDOW_MS,
        grace_ms: int = MINUTE_MS,
        clock: Callable[[], float] = time.time,
        emit_interval_s: float | None = 1.0,
        **producer_kwargs: Any,
    ) -> None:
        if window_ms <= 0:
            raise ValueError(f"window_ms must be positive, not {window_ms}")
        if grace_ms < 0:
            raise ValueError(f"grace_ms must be >= 0, not {grace_ms}")
        self.service = service
        self.host = host if host is not None else socket.gethostname()
        self.audit_topic = audit_topic
        self.window_ms = window_ms
        self.grace_ms = grace_ms
        self.clock = clock
        self.tally = DeliveryTally()
        self._owns_registry = isinstance(registry, str)
        self.registry = RegistryClient(registry) if isinstance(registry, str) else registry
        self._audit_serializer = AvroSerializer(self.registry, AUDIT_SCHEMA)
        self._serializers: dict[str, AvroSerializer] = {}
        self.producer = Producer(bootstrap_servers, **producer_kwargs)
        client_id = producer_kwargs.get("client_id", "kafka-hourly")
        try:
            self._audit_producer = Producer(
                bootstrap_servers,
                acks=-1,
                linger_ms=5,
                client_id=f"{client_id}-audit",
                security=producer_kwargs.get("security"),  # the same brokers, the same login
            )
        except BaseException:
            self.producer.close(0)
            raise
        # One publication at a time: settle, take and send happen together, so once
        # flush() holds the lock no count is half-way between the tally and a send.
        self._publish_lock = threading.Lock()
        # Failed publications since the last flush (the emitter retries every tick,
        # so only a count and the latest error are kept, not a growing list).
        self._failures = 0
        self._last_failure: BaseException | None = None
        self._closed = False
        self._stop = threading.Event()
        self._emitter = None
        if emit_interval_s is not None:
            self._emitter = threading.Thread(
                target=self._emit_loop, args=(emit_interval_s,), name="audit-emitter", daemon=True
            )
            self._emitter.start()

    # --- sending ------------------------------------------------------------------

    def send(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
        headers: list[tuple[str, bytes | None]] | None = None,
    ) -> Future:
        """Send one record (CreateTime = ``timestamp_ms`` or now); it is counted once delivered."""
        if timestamp_ms is None:
            timestamp_ms = int(self.clock() * SECOND_MS)
        future = self.producer.send(topic, value, key, partition, timestamp_ms, headers)
        if topic != self.audit_topic:
            self.tally.track(((topic, window_start(timestamp_ms, self.window_ms)), future))
        return future

    def send_avro(
        self,
        topic: str,
        record: dict,
        schema: str | dict,
        key: bytes | None = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
        headers: list[tuple[str, bytes | None]] | None = None,
    ) -> Future:
        """Serialize ``record`` with ``schema`` (registered under ``<topic>-value``) and send it."""
        text = schema if isinstance(schema, str) else json.dumps(schema)
        serializer = self._serializers.get(text)
        if serializer is None:
            serializer = self._serializers[text] = AvroSerializer(self.registry, text)
        return self.send(topic, serializer(record, topic), key, partition, timestamp_ms, headers)

    # --- publishing ---------------------------------------------------------------

    def publish_closed_windows(self) -> int:
        """Publish the counts of every window closed by now (its end + grace has passed).

        The emitter thread calls this every ``emit_interval_s``. Returns the number of
        events handed to the audit producer.
        """
        now_ms = int(self.clock() * SECOND_MS)
        with self._publish_lock:
            self.tally.settle()
            return self._publish(self.tally.take(now_ms - self.grace_ms, self.window_ms), now_ms)

    def flush(self, timeout: float | None = None) -> None:
        """Deliver every record sent so far, then publish and deliver every unpublished count.

        Raises RequestTimedOutError if records are still undelivered after ``timeout``
        seconds (the delivered ones are published all the same), AuditPublishError if
        audit events failed (their counts are kept for the next flush).
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            self.producer.flush(timeout)
        except RequestTimedOutError:
            self._publish_all(deadline)
            raise
        self._publish_all(deadline)

    def close(self, timeout: float | None = None) -> None:
        """Close the records' producer (everything is delivered or failed), publish every
        count, close the audit producer. Raises AuditPublishError if counts were lost."""
        if self._closed:
            return
        self._closed = True
        deadline = None if timeout is None else time.monotonic() + timeout
        self._stop.set()
        if self._emitter is not None:
            self._emitter.join()
        try:
            self.producer.close(timeout)
            self._publish_all(deadline)
        finally:
            self._audit_producer.close(_left(deadline))
            if self._owns_registry:
                self.registry.close()

    def __enter__(self) -> AuditedProducer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _publish_all(self, deadline: float | None) -> None:
        with self._publish_lock:
            self.tally.settle()
            # Earlier failures had their counts put back: they go out now.
            self._failures, self._last_failure = 0, None
            self._publish(self.tally.take(), int(self.clock() * SECOND_MS))
        self._audit_producer.flush(_left(deadline))
        failures, last = self._failures, self._last_failure
        self._failures, self._last_failure = 0, None
        if failures:
            raise AuditPublishError(f"{failures} audit publication(s) failed: {last!r}") from last

    def _publish(self, counts: dict[WindowKey, int], now_ms: int) -> int:
        """Under the publish lock: send one AuditEvent per counted window."""
        pending = sorted(counts.items())
        for i, ((topic, start_ms), n) in enumerate(pending):
            event = {
                "tier": TIER,
                "host": self.host,
                "service": self.service,
                "topic": topic,
                "window_start_ms": start_ms,
                "window_ms": self.window_ms,
                "count": n,
                "emitted_at_ms": now_ms,
            }
            try:
                value = self._audit_serializer(event, self.audit_topic)
                # Keyed by topic: one topic's events stay in order on one partition.
                future = self._audit_producer.send(
                    self.audit_topic, value, key=topic.encode(), timestamp_ms=now_ms
                )
            except Exception as exc:
                # The registry or the producer refused: keep this and every later count.
                for window, count in pending[i:]:
                    self.tally.add(window, count)
                self._failed(exc)
                log.warning("audit events not published, counts kept: %s", exc)
                return i
            future.add_done_callback(self._on_audit_delivery((topic, start_ms), n))
        return len(pending)

    def _on_audit_delivery(self, window: WindowKey, n: int) -> Callable[[Future], None]:
        def done(future: Future) -> None:
            error = future.exception()
            if error is not None:
                self.tally.add(window, n)
                self._failed(error)
                log.warning("audit event for %s failed (%s); its count is kept", window, error)

        return done

    def _failed(self, error: BaseException) -> None:
        self._failures += 1
        self._last_failure = error

    def _emit_loop(self, interval_s: float) -> None:
        while not self._stop.wait(interval_s):
            try:
                self.publish_closed_windows()
            except Exception:  # keep emitting; the counts stay for the next attempt
                log.exception("publishing closed audit windows failed")


def _left(deadline: float | None) -> float | None:
    return None if deadline is None else max(0.0, deadline - time.monotonic())
