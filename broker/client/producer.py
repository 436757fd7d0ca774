"""The producer: batches records per partition and sends them from a background thread.

`send()` only appends the record to its partition's open batch under one lock and
returns a Future; a sender thread turns ready batches (full, lingered long enough, or
flushed) into record batches v2 (`build_batch`, compression included) and sends one
Produce request per leader with every ready partition, waiting for the answers before
the next round. One request in flight per broker keeps each partition's batches in
order, so idempotent sequences never arrive out of order.

Partitioning follows the Java client: keyed records go to
murmur2(key) mod partitions (`partitioner.partition_for_key`); records without a key
stick to one randomly chosen partition per topic until its batch is sent or full.

Idempotence (on by default, as in Kafka 3): an InitProducerId gives the producer an
id and epoch; each partition's batches carry consecutive sequence numbers, and a
batch retried after an error or a lost connection keeps its sequence, so the broker
drops the duplicate. It needs acks=-1 ("all"); with acks 0 or 1 it is switched off.

Transactions (`transactional_id`): init_transactions() finds the transaction coordinator
and takes the id's producer id and epoch (fencing older producers of the id);
records are sent only between begin_transaction() and commit_transaction() /
abort_transaction(); the sender adds each partition to the transaction
(AddPartitionsToTxn) before its first batch goes out. The state and the error
classification are broker/client/transaction.py's; requests to coordinators go over a
metadata of their own (`_coordination`), so the caller's thread and the sender thread
never share a socket with the Produce requests.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections import deque
from concurrent.futures import Future
from typing import NamedTuple

from broker.client.cluster import ClusterMetadata
from broker.client.connection import UNREACHABLE
from broker.client.coordinator import (
    COORDINATOR_ERRORS,
    TRANSACTION_KEY_TYPE,
    GroupCoordinators,
)
from broker.client.partitioner import partition_for_key
from broker.client.security import SecurityConfig
from broker.client.transaction import (
    ADD_OFFSETS,
    ADD_PARTITIONS,
    END,
    INIT,
    TXN_OFFSET_COMMIT,
    Action,
    ConsumerGroupMetadata,
    TransactionManager,
    TxnState,
    worst,
)
from broker.protocol.apis import (
    ADD_OFFSETS_TO_TXN,
    ADD_PARTITIONS_TO_TXN,
    END_TXN,
    INIT_PRODUCER_ID,
    PRODUCE,
)
from broker.protocol.apis import (
    TXN_OFFSET_COMMIT as TXN_OFFSET_COMMIT_API,
)
from broker.protocol.errors import (
    ErrorCode,
    KafkaError,
    RequestTimedOutError,
    UnknownTopicOrPartitionError,
    UnsupportedVersionError,
    as_error_code,
    error_for,
    retriable,
)
from broker.records.batch import build_batch
from broker.records.compression import CODEC_NAMES
from broker.records.header import CODEC_ZSTD
from broker.util.clock import now_ms

log = logging.getLogger(__name__)

# Bytes a record adds to a batch beyond its key and value (length, attributes,
# timestamp and offset deltas, key/value lengths, header count), rounded up so a
# "full" batch never exceeds batch_size once encoded.
_RECORD_OVERHEAD = 16
# A request carries at most this many bytes of batches; the rest wait a round.
_MAX_REQUEST_BYTES = 32 * 1024 * 1024
_SEQUENCE_MOD = 1 << 31
_RETRY_BACKOFF_S = 0.1
_BYTES = (bytes, bytearray)


class RecordMetadata(NamedTuple):
    topic: str
    partition: int
    offset: int  # -1 with acks=0 (the broker does not answer)
    timestamp: int  # CreateTime given or taken at send(), or the broker's LogAppendTime


def _future_states() -> tuple[str, str]:
    """A Future's pending and finished state values, read from a Future driven through its
    public methods: the constants themselves live in the private concurrent.futures._base.
    `_RecordFuture` needs them to skip Future.__init__ and set_result (plain Futures cost
    ~0.9 µs more per record, a quarter of what send() costs, measured on the shared host)."""
    probe = Future()
    pending = probe._state
    probe.set_result(None)
    return pending, probe._state


_PENDING, _FINISHED = _future_states()


class _RecordFuture(Future):
    """A Future that shares one Condition with the other records of its batch.

    Future() allocates a Condition (and its RLock) per instance and set_result() takes
    it, notifies and runs callbacks per record; together they cost more than encoding
    the record. Here a batch's futures share its condition and are resolved together
    by `_resolve_batch` while holding it, so no waiter is ever woken for a future that
    is not done yet. cancel() is refused for the same reason (and a record handed to
    the producer cannot be taken back anyway).
    """

    # Read from the class until first written: fewer stores per record.
    _state = _PENDING
    _result = None
    _exception = None

    def __init__(self, condition: threading.Condition):
        # Future.__init__ is deliberately not called: it would allocate a Condition.
        self._condition = condition
        self._waiters = []
        self._done_callbacks = []

    def cancel(self) -> bool:
        return False


def _resolve_batch(condition: threading.Condition, futures: list, results: list) -> None:
    """set_result for every future of a batch, with one notify for the whole batch.

    Futures nobody registered a callback or a concurrent.futures.wait() on (nearly all
    of them) only get their state set; the rest go through Future.set_result.
    """
    with condition:
        for future, result in zip(futures, results, strict=True):
            if future._waiters or future._done_callbacks:
                future.set_result(result)
            else:
                future._result = result
                future._state = _FINISHED
        condition.notify_all()


class _Batch:
    """The records of one partition that will travel as one record batch."""

    __slots__ = (
        "topic",
        "partition",
        "records",
        "futures",
        "size",
        "created",
        "condition",
        "done",
        "payload",
        "producer_id",
        "base_sequence",
        "attempts",
        "retry_at",
    )

    def __init__(self, topic: str, partition: int, now: float):
        self.topic = topic
        self.partition = partition
        self.records: list[tuple] = []
        self.futures: list[_RecordFuture] = []
        self.size = 0
        self.created = now
        self.condition = threading.Condition()
        self.done = threading.Event()
        self.payload: bytes | None = None  # built (and sealed) when first drained
        self.producer_id = -1
        self.base_sequence = -1
        self.attempts = 0
        self.retry_at = 0.0


class Producer:
    """Asynchronous, batching producer; see the module docstring."""

    def __init__(
        self,
        bootstrap_servers: str | list[str],
        acks: int | str = -1,
        compression: str = "none",
        linger_ms: float = 5,
        batch_size: int = 1048576,
        enable_idempotence: bool = True,
        client_id: str = "kafka-hourly",
        request_timeout_ms: int = 30000,
        retries: int = 2147483647,
        delivery_timeout_ms: int = 120000,
        buffer_memory: int = 32 * 1024 * 1024,
        max_block_ms: int = 60000,
        security: SecurityConfig | None = None,
        transactional_id: str | None = None,
        transaction_timeout_ms: int = 60000,
    ):
        acks = -1 if acks == "all" else int(acks)
        if acks not in (-1, 0, 1):
            raise ValueError(f"acks must be -1 ('all'), 0 or 1, not {acks}")
        if compression not in CODEC_NAMES:
            raise ValueError(f"compression must be one of {sorted(CODEC_NAMES)}")
        self.acks = acks
        self.codec = CODEC_NAMES[compression]
        self.linger_s = linger_ms / 1000
        self.batch_size = batch_size
        self.idempotent = enable_idempotence and acks == -1
        if transactional_id is not None and not self.idempotent:
            raise ValueError(
                f"transactional.id {transactional_id!r} needs enable.idempotence=true and "
                f"acks=all, not enable.idempotence={enable_idempotence} acks={acks}"
            )
        self.request_timeout_ms = request_timeout_ms
        self.retries = retries
        self.delivery_timeout_s = delivery_timeout_ms / 1000
        self.buffer_memory = buffer_memory
        self.max_block_s = max_block_ms / 1000
        self.cluster = ClusterMetadata(
            bootstrap_servers, client_id, request_timeout_ms / 1000, security
        )

        self._lock = threading.Lock()
        self._wakeup = threading.Condition(self._lock)
        self._space = threading.Condition(self._lock)  # send() waits here when the buffer is full
        self._buffered = 0  # bytes of records queued or in flight
        self._queues: dict[tuple[str, int], deque[_Batch]] = {}
        self._incomplete: set[_Batch] = set()
        self._sticky: dict[str, int] = {}
        self._num_partitions: dict[str, int] = {}
        self._flushing = 0
        self._closing = False
        self._closed = False
        self._drain_start = 0

        # Sender-thread state.
        self._producer_id = -1
        self._producer_epoch = -1
        self._sequences: dict[tuple[str, int], int] = {}
        self._refresh_needed = False

        self._txn: TransactionManager | None = None
        if transactional_id is not None:
            self._txn = TransactionManager(transactional_id, transaction_timeout_ms)
            self._coordination = ClusterMetadata(
                bootstrap_servers, client_id, request_timeout_ms / 1000, security
            )
            self._coordination_lock = threading.Lock()
            timeout_s = request_timeout_ms / 1000
            self._txn_coordinators = GroupCoordinators(
                self._coordination, timeout_s, TRANSACTION_KEY_TYPE
            )
            self._group_coordinators = GroupCoordinators(self._coordination, timeout_s)
        self._sender = threading.Thread(target=self._run, name="kafka-producer-sender", daemon=True)
        self._sender.start()

    # --- the user's side ----------------------------------------------------------

    def send(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
        headers: list[tuple[str, bytes | None]] | None = None,
    ) -> Future:
        """Queue one record; the Future resolves to its RecordMetadata once acknowledged."""
        if self._closing:
            raise KafkaError("the producer is closed")
        if self._txn is not None:
            self._txn.check_send()
        if value is not None and not isinstance(value, _BYTES):
            raise TypeError(f"value must be bytes or None, not {type(value).__name__}")
        if key is not None and not isinstance(key, _BYTES):
            raise TypeError(f"key must be bytes or None, not {type(key).__name__}")
        count = self._num_partitions.get(topic) or self._load_partitions(topic)
        if partition is None:
            if key is not None:
                partition = partition_for_key(key, count)
        elif not 0 <= partition < count:
            raise UnknownTopicOrPartitionError(
                f"topic {topic!r} has partitions 0-{count - 1}, not {partition}"
            )
        if timestamp_ms is None:
            timestamp_ms = now_ms()
        size = _RECORD_OVERHEAD + (len(value) if value is not None else 0)
        if key is not None:
            size += len(key)
        if headers:
            headers = list(headers.items()) if isinstance(headers, dict) else list(headers)
            size += sum(len(k) + len(v or b"") + 4 for k, v in headers)
        with self._lock:
            if self._buffered >= self.buffer_memory:
                self._wait_for_space()
            if partition is None:
                partition = self._sticky.get(topic)
                if partition is None:
                    partition = self._sticky[topic] = _other_partition(count, -1)
            queue = self._queues.get((topic, partition))
            if queue is None:
                queue = self._queues[(topic, partition)] = deque()
            batch = queue[-1] if queue else None
            if (
                batch is None
                or batch.payload is not None
                or (batch.size + size > self.batch_size and batch.records)
            ):
                batch = _Batch(topic, partition, time.monotonic())
                queue.append(batch)
                self._incomplete.add(batch)
                self._wakeup.notify()  # the sender's next deadline may now be sooner
            batch.records.append((key, value, timestamp_ms, headers))
            future = _RecordFuture(batch.condition)
            batch.futures.append(future)
            batch.size += size
            self._buffered += size
            if batch.size >= self.batch_size:
                if self._sticky.get(topic) == partition:
                    self._sticky[topic] = _other_partition(count, partition)
                self._wakeup.notify()
        return future

    def _wait_for_space(self) -> None:
        """Under the lock: block send() while buffer_memory bytes wait to be sent (backpressure)."""
        deadline = time.monotonic() + self.max_block_s
        while self._buffered >= self.buffer_memory:
            left = deadline - time.monotonic()
            if left <= 0:
                raise RequestTimedOutError(
                    f"{self._buffered} bytes still unsent after {self.max_block_s}s "
                    f"(buffer_memory {self.buffer_memory})"
                )
            self._wakeup.notify()  # a full buffer is worth sending now
            self._space.wait(left)

    def partitions_for(self, topic: str) -> int:
        """How many partitions `topic` has (created, where the broker auto-creates topics,
        as a send would)."""
        known = self._num_partitions.get(topic)
        return known if known is not None else self._load_partitions(topic)

    def _load_partitions(self, topic: str) -> int:
        """The partition count of `topic`, waiting while an auto-created topic gets leaders.

        Raises UnknownTopicOrPartitionError at once if the broker does not know the topic
        and will not create it.
        """
        deadline = time.monotonic() + self.request_timeout_ms / 1000
        while True:
            error = self.cluster.refresh([topic], allow_auto_create=True).get(topic)
            meta = self.cluster.topics.get(topic)
            if meta is not None and meta.partitions:
                self._num_partitions[topic] = len(meta.partitions)
                return len(meta.partitions)
            if error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                raise UnknownTopicOrPartitionError(
                    f"topic {topic!r} does not exist and the broker does not create it"
                )
            if error is not None and error != ErrorCode.NONE and not retriable(error):
                raise error_for(error, f"metadata of topic {topic!r}")
            if time.monotonic() > deadline:
                raise RequestTimedOutError(f"no metadata for topic {topic!r} ({error})")
            time.sleep(_RETRY_BACKOFF_S)

    def flush(self, timeout: float | None = None) -> None:
        """Send everything queued so far, ignoring linger, and wait for the outcomes.

        Raises RequestTimedOutError if records are still unacknowledged after `timeout`
        seconds. Individual failures are reported through the records' futures.
        """
        with self._lock:
            batches = list(self._incomplete)
            self._flushing += 1
            self._wakeup.notify()
        try:
            deadline = None if timeout is None else time.monotonic() + timeout
            for batch in batches:
                left = None if deadline is None else max(0.0, deadline - time.monotonic())
                if not batch.done.wait(left):
                    raise RequestTimedOutError(f"flush did not finish within {timeout}s")
        finally:
            with self._lock:
                self._flushing -= 1

    def close(self, timeout: float | None = None) -> None:
        """Flush, then stop the sender. Records still unsent after `timeout` fail."""
        if self._closed:
            return
        self._closing = True
        try:
            self.flush(timeout)
        except RequestTimedOutError:
            pass
        with self._lock:
            self._closed = True
            self._wakeup.notify()
        self._sender.join(timeout)
        self.cluster.close()  # unblocks a sender still waiting on the network
        if self._txn is not None:
            self._coordination.close()
        self._sender.join(self.request_timeout_ms / 1000)
        with self._lock:
            leftover = list(self._incomplete)
        for batch in leftover:
            self._fail(batch, RequestTimedOutError("the producer was closed before delivery"))

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # --- transactions (docs/contracts/transactions.md) -----------------------------

    @property
    def transaction_state(self) -> TxnState | None:
        """The transactional state (None for a producer without a transactional id)."""
        return None if self._txn is None else self._txn.state

    def init_transactions(self, timeout_s: float | None = None) -> None:
        """Take the transactional id's producer id and epoch: a transaction an older
        producer of the id left open is aborted and that producer fenced. Called once,
        before the first begin_transaction(); after a RequestTimedOutError it may be called
        again."""
        txn = self._transactional()
        deadline = self._deadline(timeout_s)
        if txn.state != TxnState.INITIALIZING:
            txn.start_init()
        self._init_transactional_id(deadline, -1, -1)

    def begin_transaction(self) -> None:
        """Open a transaction: send() is allowed until commit or abort."""
        self._transactional().begin()

    def send_offsets_to_transaction(
        self,
        offsets: dict,
        group: str | ConsumerGroupMetadata,
        timeout_s: float | None = None,
    ) -> None:
        """Commit a consumer's offsets as part of the open transaction: they count only if
        it commits. `offsets`: {(topic, partition): next offset to consume, or an
        (offset, metadata[, leader_epoch]) tuple such as OffsetAndMetadata}; `group`: the
        group id or the consumer's group metadata (GroupConsumer.group_metadata(), which
        lets the coordinator refuse a member of an older generation, KIP-447)."""
        txn = self._transactional()
        txn.check_in_transaction()
        meta = ConsumerGroupMetadata(group) if isinstance(group, str) else group
        deadline = self._deadline(timeout_s)
        self._coordinator_request(
            ADD_OFFSETS,
            ADD_OFFSETS_TO_TXN,
            self._txn_ids({"group_id": meta.group_id}),
            lambda r: [r["error_code"]],
            deadline,
        )
        txn.offsets_added = True
        topics: dict[str, list[dict]] = {}
        for (topic, partition), value in sorted(offsets.items()):
            if isinstance(value, int):
                offset, metadata, leader_epoch = value, "", -1
            else:  # OffsetAndMetadata (ours or confluent-kafka's TopicPartition-like ones)
                offset = value.offset
                metadata = getattr(value, "metadata", "") or ""
                leader_epoch = getattr(value, "leader_epoch", -1)
                leader_epoch = -1 if leader_epoch is None else leader_epoch
            topics.setdefault(topic, []).append(
                {
                    "partition_index": partition,
                    "committed_offset": offset,
                    "committed_leader_epoch": leader_epoch,
                    "committed_metadata": metadata,
                }
            )
        body = self._txn_ids(
            {
                "group_id": meta.group_id,
                "generation_id": meta.generation_id,
                "member_id": meta.member_id,
                "group_instance_id": meta.group_instance_id,
                "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
            }
        )
        self._coordinator_request(
            TXN_OFFSET_COMMIT,
            TXN_OFFSET_COMMIT_API,
            body,
            lambda r: [p["error_code"] for t in r["topics"] for p in t["partitions"]],
            deadline,
            group=meta.group_id,
        )

    def commit_transaction(self, timeout_s: float | None = None) -> None:
        """Send what the transaction holds, then commit it (EndTxn). Raises
        TransactionAbortableError if some of it failed (abort_transaction() then),
        TransactionFatalError if the producer was fenced; after RequestTimedOutError it
        may be called again."""
        txn = self._transactional()
        deadline = self._deadline(timeout_s)
        if txn.state != TxnState.COMMITTING:
            txn.start_commit()
        self.flush(max(0.0, deadline - time.monotonic()))
        failed = txn.may_send()
        if failed is not None:
            raise failed
        self._end_transaction(True, deadline)

    def abort_transaction(self, timeout_s: float | None = None) -> None:
        """Abort the open transaction: records not sent yet are dropped (their futures
        fail), the rest are marked aborted (EndTxn). Allowed after an abortable error."""
        txn = self._transactional()
        deadline = self._deadline(timeout_s)
        if txn.state != TxnState.ABORTING:
            txn.start_abort()
        self._drop_unsent()
        self.flush(max(0.0, deadline - time.monotonic()))
        if txn.bump_epoch:
            # The broker lost the producer id or the epoch's sequences broke: EndTxn
            # would fail the same way. InitProducerId naming the current epoch makes the
            # coordinator abort the transaction and bump the epoch (KIP-360).
            txn.completed()
        else:
            self._end_transaction(False, deadline)
        if txn.state == TxnState.INITIALIZING:
            self._init_transactional_id(deadline, txn.producer_id, txn.epoch)

    def _transactional(self) -> TransactionManager:
        if self._txn is None:
            raise KafkaError("this producer has no transactional_id")
        return self._txn

    def _deadline(self, timeout_s: float | None) -> float:
        return time.monotonic() + (self.max_block_s if timeout_s is None else timeout_s)

    def _txn_ids(self, body: dict) -> dict:
        txn = self._txn
        return {
            "transactional_id": txn.transactional_id,
            "producer_id": txn.producer_id,
            "producer_epoch": txn.epoch,
            **body,
        }

    def _init_transactional_id(self, deadline: float, producer_id: int, epoch: int) -> None:
        txn = self._txn
        body = {
            "transactional_id": txn.transactional_id,
            "transaction_timeout_ms": txn.timeout_ms,
            # KIP-360: naming the current id and epoch lets the coordinator bump it
            # instead of taking it for another producer.
            "producer_id": producer_id,
            "producer_epoch": epoch,
        }
        response = self._coordinator_request(
            INIT, INIT_PRODUCER_ID, body, lambda r: [r["error_code"]], deadline
        )
        # The sender is idle: no transaction is open while the id is initialized.
        self._producer_id = response["producer_id"]
        self._producer_epoch = response["producer_epoch"]
        self._sequences.clear()
        txn.initialized(self._producer_id, self._producer_epoch)

    def _end_transaction(self, commit: bool, deadline: float) -> None:
        txn = self._txn
        if txn.partitions or txn.offsets_added:
            self._coordinator_request(
                END,
                END_TXN,
                self._txn_ids({"committed": commit}),
                lambda r: [r["error_code"]],
                deadline,
            )
        # else nothing reached the coordinator: there is nothing to end (as Kafka).
        txn.completed()

    def _drop_unsent(self) -> None:
        """An abort fails the batches that never left (as Kafka's abortUndrainedBatches);
        those in flight are waited for."""
        dropped = []
        with self._lock:
            for tp, queue in list(self._queues.items()):
                keep = deque(b for b in queue if b.payload is not None)
                dropped.extend(b for b in queue if b.payload is None)
                if keep:
                    self._queues[tp] = keep
                else:
                    del self._queues[tp]
        for batch in dropped:
            self._fail(batch, KafkaError("the transaction was aborted before this was sent"))

    def _coordinator_request(
        self,
        request: str,
        api_key: int,
        body: dict,
        codes,
        deadline: float,
        group: str | None = None,
    ) -> dict:
        """Send a transactional request to the transaction coordinator (or, `group`, to
        that group's coordinator) until its answer is DONE, ABORTABLE or FATAL by
        transaction.py's table (raised as TransactionAbortableError /
        TransactionFatalError) or `deadline` passes (RequestTimedOutError; the caller may
        try again)."""
        txn = self._txn
        coordinators = self._txn_coordinators if group is None else self._group_coordinators
        key = txn.transactional_id if group is None else group
        backoff = _RETRY_BACKOFF_S / 2
        while True:
            try:
                with self._coordination_lock:
                    response = coordinators.request(key, api_key, body, lambda r: ())
                action, code = worst(request, codes(response))
                error = error_for(code, f"{request} of transactional id {txn.transactional_id!r}")
            except UNREACHABLE as exc:
                action, error = Action.FIND_COORDINATOR, exc
            except KafkaError as exc:
                # Raised by FindCoordinator (e.g. TRANSACTIONAL_ID_AUTHORIZATION_FAILED):
                # only its coordinator errors are worth another lookup.
                retry = exc.code in COORDINATOR_ERRORS
                action, error = (Action.FIND_COORDINATOR if retry else Action.FATAL), exc
            if action == Action.DONE:
                return response
            if action in (Action.ABORTABLE, Action.FATAL):
                raise txn.fail(action, error)
            if action == Action.FIND_COORDINATOR:
                coordinators.forget(key)
            if time.monotonic() + backoff > deadline:
                raise RequestTimedOutError(f"{request} did not complete: {error}")
            time.sleep(backoff)
            backoff = min(backoff * 2, 1.0)

    def _add_partitions(self, batches: list[_Batch]) -> list[_Batch]:
        """On the sender thread: add the batches' partitions that are new to the
        transaction (AddPartitionsToTxn) before any of their batches goes out. Returns
        the batches that may be sent now; the others were failed or put back."""
        txn = self._txn
        failed = txn.may_send()
        if failed is None:
            new = txn.partitions_to_add((b.topic, b.partition) for b in batches)
            if not new:
                return batches
            topics: dict[str, list[int]] = {}
            for topic, partition in new:
                topics.setdefault(topic, []).append(partition)
            body = {
                "v3_and_below_transactional_id": txn.transactional_id,
                "v3_and_below_producer_id": txn.producer_id,
                "v3_and_below_producer_epoch": txn.epoch,
                "v3_and_below_topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
            }
            deadline = time.monotonic() + self.request_timeout_ms / 1000
            try:
                self._coordinator_request(
                    ADD_PARTITIONS,
                    ADD_PARTITIONS_TO_TXN,
                    body,
                    lambda r: [
                        p["partition_error_code"]
                        for t in r["results_by_topic_v3_and_below"]
                        for p in t["results_by_partition"]
                    ],
                    deadline,
                )
            except RequestTimedOutError as exc:
                for batch in batches:
                    self._requeue(batch, exc)
                return []
            except KafkaError as exc:
                failed = exc
            else:
                txn.added(new)
                return batches
        for batch in batches:
            self._fail(batch, failed)
        return []

    # --- the sender thread --------------------------------------------------------

    def _run(self) -> None:
        while True:
            with self._lock:
                batches = self._wait_for_ready()
            if batches is None:
                return
            try:
                self._send_round(batches)
            except Exception as exc:  # never leave futures hanging on a bug
                log.exception("producer sender round failed")
                for batch in batches:
                    if not batch.done.is_set():
                        self._fail(batch, KafkaError(f"sender failed: {exc!r}"))

    def _wait_for_ready(self) -> list[_Batch] | None:
        """Under the lock: wait until some batches may be sent and take them off their queues.

        None means the producer is closed (or closing with nothing left) and the sender
        should stop.
        """
        while True:
            if self._closed:
                return None
            now = time.monotonic()
            urgent = self._flushing > 0 or self._closing
            ready: list[tuple[str, int]] = []
            wait: float | None = None
            for tp, queue in self._queues.items():
                if not queue:
                    continue
                batch = queue[0]
                if batch.retry_at > now:
                    due = batch.retry_at
                elif urgent or len(queue) > 1 or batch.size >= self.batch_size:
                    ready.append(tp)
                    continue
                else:
                    due = batch.created + self.linger_s
                    if due <= now:
                        ready.append(tp)
                        continue
                wait = due - now if wait is None else min(wait, due - now)
            if ready:
                return self._drain(ready)
            if self._closing and not self._incomplete:
                return None
            self._wakeup.wait(wait)

    def _drain(self, ready: list[tuple[str, int]]) -> list[_Batch]:
        # Rotate the starting partition so a request-size cap never starves the same ones.
        start = self._drain_start % len(ready)
        self._drain_start += 1
        taken: list[_Batch] = []
        total = 0
        for tp in ready[start:] + ready[:start]:
            queue = self._queues[tp]
            if taken and total + queue[0].size > _MAX_REQUEST_BYTES:
                break
            batch = queue.popleft()
            if not queue:
                del self._queues[tp]
            if self._sticky.get(tp[0]) == tp[1] and batch.payload is None:
                # Java's sticky partitioner moves on once the sticky batch is sent.
                count = self._num_partitions.get(tp[0], 1)
                self._sticky[tp[0]] = _other_partition(count, tp[1])
            total += batch.size
            taken.append(batch)
        return taken

    def _requeue(self, batch: _Batch, error: KafkaError) -> None:
        """Put a failed batch back at the front of its queue, or fail it if out of chances."""
        batch.attempts += 1
        now = time.monotonic()
        if batch.attempts > self.retries or now - batch.created > self.delivery_timeout_s:
            # The last attempt may have been appended without our hearing of it.
            self._give_up(batch, error, maybe_appended=True)
            return
        batch.retry_at = now + _RETRY_BACKOFF_S
        with self._lock:
            tp = (batch.topic, batch.partition)
            queue = self._queues.get(tp)
            if queue is None:
                queue = self._queues[tp] = deque()
            queue.appendleft(batch)

    def _send_round(self, batches: list[_Batch]) -> None:
        if self._refresh_needed:
            self._refresh_needed = False
            try:
                self.cluster.refresh(sorted({b.topic for b in batches}), allow_auto_create=True)
            except KafkaError as exc:
                log.warning("metadata refresh failed: %s", exc)
        if self._txn is not None:
            batches = self._add_partitions(batches)
        elif self.idempotent and self._producer_id < 0:
            try:
                self._init_producer_id()
            except UnsupportedVersionError as exc:  # retrying cannot help
                for batch in batches:
                    self._fail(batch, exc)
                return
            except KafkaError as exc:
                for batch in batches:
                    self._requeue(batch, exc)
                self._refresh_needed = True
                return

        by_leader: dict[int, list[_Batch]] = {}
        for batch in batches:
            try:
                leader = self.cluster.leader_for(batch.topic, batch.partition)
            except KafkaError as exc:
                self._refresh_needed = True
                self._requeue(batch, exc)
                continue
            self._seal(batch)
            by_leader.setdefault(leader, []).append(batch)

        sent = []
        for leader, group in by_leader.items():
            try:
                conn = self.cluster.connection(leader)
                version = conn.version_for(PRODUCE)
                if self.codec == CODEC_ZSTD and version < 7:
                    raise UnsupportedVersionError(
                        f"zstd needs Produce v7, the broker speaks up to v{version}"
                    )
                cid = conn.send(PRODUCE, self._produce_body(group), version, self.acks != 0)
            except UNREACHABLE as exc:
                self.cluster.drop_connection(leader)
                self._refresh_needed = True
                for batch in group:
                    self._requeue(batch, exc)
                continue
            except KafkaError as exc:
                for batch in group:
                    self._give_up(batch, exc, maybe_appended=False)
                continue
            if self.acks == 0:
                for batch in group:
                    self._complete(batch, -1, -1)
                continue
            sent.append((leader, conn, cid, group))

        for leader, conn, cid, group in sent:
            try:
                response = conn.receive(cid)
            except UNREACHABLE as exc:
                self.cluster.drop_connection(leader)
                self._refresh_needed = True
                for batch in group:
                    self._requeue(batch, exc)
                continue
            self._handle_response(response, group)

    def _seal(self, batch: _Batch) -> None:
        """Build the batch bytes once; with idempotence, give it its sequence numbers.

        A batch keeps its bytes (and so its sequence) across retries, which is what lets
        the broker recognise a retry of a batch it already appended.
        """
        if batch.payload is not None and batch.producer_id == self._producer_id:
            return
        base_sequence = -1
        if self.idempotent:
            tp = (batch.topic, batch.partition)
            base_sequence = self._sequences.get(tp, 0)
            self._sequences[tp] = (base_sequence + len(batch.records)) % _SEQUENCE_MOD
        batch.producer_id = self._producer_id
        batch.base_sequence = base_sequence
        batch.payload = build_batch(
            batch.records,
            self.codec,
            producer_id=self._producer_id,
            producer_epoch=self._producer_epoch,
            base_sequence=base_sequence,
            transactional=self._txn is not None,
        )

    def _produce_body(self, group: list[_Batch]) -> dict:
        topics: dict[str, list[dict]] = {}
        for batch in group:
            topics.setdefault(batch.topic, []).append(
                {"index": batch.partition, "records": batch.payload}
            )
        return {
            "transactional_id": None if self._txn is None else self._txn.transactional_id,
            "acks": self.acks,
            "timeout_ms": self.request_timeout_ms,
            "topic_data": [{"name": t, "partition_data": ps} for t, ps in topics.items()],
        }

    def _handle_response(self, response: dict, group: list[_Batch]) -> None:
        by_tp = {(b.topic, b.partition): b for b in group}
        for t in response["responses"]:
            for p in t["partition_responses"]:
                batch = by_tp.pop((t["name"], p["index"]), None)
                if batch is None:
                    continue
                error = as_error_code(p["error_code"])
                if error in (ErrorCode.NONE, ErrorCode.DUPLICATE_SEQUENCE_NUMBER):
                    # A duplicate was appended by an earlier attempt whose answer we lost.
                    self._complete(batch, p["base_offset"], p["log_append_time_ms"])
                elif error == ErrorCode.UNKNOWN_PRODUCER_ID and self.idempotent:
                    # The broker lost our producer state: start over with a new id; the
                    # batch is rebuilt with fresh sequences when it is next sent.
                    self._reset_producer_id()
                    self._requeue(batch, error_for(error, p["error_message"]))
                elif retriable(error):
                    if error in (
                        ErrorCode.NOT_LEADER_OR_FOLLOWER,
                        ErrorCode.LEADER_NOT_AVAILABLE,
                        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                    ):
                        self._refresh_needed = True
                    self._requeue(batch, error_for(error, p["error_message"]))
                else:
                    if error == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER and self.idempotent:
                        # Sequences of this partition are broken; later batches restart
                        # under a new producer id instead of failing one after another.
                        self._reset_producer_id()
                    detail = p["error_message"] or f"produce to {batch.topic}-{batch.partition}"
                    self._give_up(batch, error_for(error, detail), maybe_appended=False)
        for batch in by_tp.values():
            self._requeue(batch, KafkaError("partition missing from Produce response"))

    def _init_producer_id(self) -> None:
        conn = self.cluster.any_connection()
        try:
            response = conn.request(
                INIT_PRODUCER_ID, {"transactional_id": None, "transaction_timeout_ms": 60000}
            )
        except UNREACHABLE:
            conn.close()
            raise
        if response["error_code"]:
            raise error_for(response["error_code"], "InitProducerId")
        self._producer_id = response["producer_id"]
        self._producer_epoch = response["producer_epoch"]
        self._sequences.clear()

    def _reset_producer_id(self) -> None:
        if self._txn is not None:
            # The epoch's sequences are broken: the transaction cannot commit, and after
            # its abort InitProducerId bumps the epoch, restarting them (KIP-360).
            self._txn.fail(
                Action.ABORTABLE,
                KafkaError(
                    "the producer's sequence numbers were lost",
                    ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                ),
            )
            return
        self._producer_id = -1
        self._producer_epoch = -1
        self._sequences.clear()

    # --- outcomes -----------------------------------------------------------------

    def _complete(self, batch: _Batch, base_offset: int, log_append_time: int) -> None:
        topic, partition = batch.topic, batch.partition
        new = tuple.__new__
        if base_offset < 0:
            offsets = [-1] * len(batch.records)
        else:
            offsets = range(base_offset, base_offset + len(batch.records))
        if log_append_time >= 0:
            timestamps = [log_append_time] * len(batch.records)
        else:
            timestamps = [record[2] for record in batch.records]
        results = [
            new(RecordMetadata, (topic, partition, offset, timestamp))
            for offset, timestamp in zip(offsets, timestamps, strict=True)
        ]
        with batch.condition:
            if batch.done.is_set():  # failed meanwhile by close()
                return
            _resolve_batch(batch.condition, batch.futures, results)
            batch.done.set()
        self._forget(batch)

    def _give_up(self, batch: _Batch, error: KafkaError, maybe_appended: bool) -> None:
        """Fail a batch for good, keeping the partition's idempotent sequence gap-free.

        A batch the broker refused took sequence numbers the broker never saw; the next
        batch would be OUT_OF_ORDER. If it was the partition's latest sealed batch (one
        is in flight at a time, so it normally is), its numbers are handed back. If it
        may have been appended, or cannot be rolled back, the producer takes a new id,
        which restarts every sequence at zero.
        """
        if self.idempotent and batch.payload is not None and batch.producer_id >= 0:
            if batch.producer_id == self._producer_id:
                tp = (batch.topic, batch.partition)
                end = (batch.base_sequence + len(batch.records)) % _SEQUENCE_MOD
                if not maybe_appended and self._sequences.get(tp) == end:
                    self._sequences[tp] = batch.base_sequence
                else:
                    self._reset_producer_id()
        self._fail(batch, error)

    def _fail(self, batch: _Batch, error: BaseException) -> None:
        with batch.condition:
            if batch.done.is_set():
                return
            for future in batch.futures:
                future.set_exception(error)
            batch.done.set()
        self._forget(batch)
        if self._txn is not None and isinstance(error, KafkaError):
            self._txn.batch_failed(error)

    def _forget(self, batch: _Batch) -> None:
        batch.records = []  # the records and their bytes are no longer needed
        batch.payload = None
        with self._lock:
            self._incomplete.discard(batch)
            self._buffered -= batch.size
            self._space.notify_all()
            if self._closing:
                self._wakeup.notify()


def _other_partition(count: int, current: int) -> int:
    """A random partition other than `current` (when there is another), for sticky records."""
    if count <= 1:
        return 0
    choice = random.randrange(count - 1) if current >= 0 else random.randrange(count)
    return choice + 1 if 0 <= current <= choice else choice
