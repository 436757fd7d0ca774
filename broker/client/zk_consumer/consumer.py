"""`ZkConsumer`: Kafka 0.8's high-level consumer, groups kept in ZooKeeper (README.md).

Two threads share a consumer. The caller's thread polls: it fetches from the leaders of
the partitions this member owns (through `SimpleConsumer`) and hands records out. The
rebalancer thread reacts to ZooKeeper: when members, brokers or a topic's partitions
change, it stops the hand-out, commits, releases its owner znodes, computes the seeds'
range assignment and claims its share; it also runs auto commit. They meet under one
condition variable; ZooKeeper and broker I/O happen outside it, and a fetch that
straddles a rebalance is discarded (the generation changed), so no record of a partition
is handed out once it was released.

At least once: the offsets committed are those of records the caller has processed, which
it says by calling poll() (or commit(), or close()) again after handling what the last
poll() returned.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import KazooException, NodeExistsError, NoNodeError
from kazoo.handlers.threading import KazooTimeoutError

from broker.client.group.fetcher import ConsumerRecord  # the records every consumer returns
from broker.client.simple_consumer import FetchRequest, SimpleConsumer
from broker.client.zk_consumer import zk_group
from broker.client.zk_consumer.assignment import assign, thread_ids
from broker.client.zk_consumer.config import parse_config
from broker.cluster import TopicPartition
from broker.protocol.errors import ErrorCode, KafkaError
from broker.protocol.topic import topic_name_problem
from broker.util.clock import now_ms
from broker.zk import layout as z

log = logging.getLogger(__name__)


class RebalanceFailedError(RuntimeError):
    """Every attempt of a rebalance (rebalance.max.retries) found a partition of this
    member's share still owned by another member. poll() raises it until a later
    rebalance (the next change in the group) succeeds."""


class ZkConsumer:
    """A member of a ZooKeeper consumer group, consuming `topics`.

    `config`: the keys of `ZK_CONSUMER_CONFIG` (zookeeper.connect and group.id required);
    values may be strings or Python values. Connects, registers and starts the first
    rebalance before returning. Use from one thread (poll, commit, close); the rebalancer
    is its own.
    """

    def __init__(self, topics: Iterable[str], config: Mapping[str, Any]):
        self.config = parse_config(config)
        self.topics = sorted(set(topics))
        if not self.topics:
            raise ValueError("a ZkConsumer needs at least one topic")
        for topic in self.topics:
            problem = topic_name_problem(topic)
            if problem:
                raise ValueError(f"topic {topic!r}: {problem}")
        self.group: str = self.config["group.id"]
        suffix = self.config["consumer.id"] or (
            f"{socket.gethostname()}-{now_ms()}-{uuid.uuid4().hex[:8]}"
        )
        self.consumer_id = f"{self.group}_{suffix}"
        # One stream per topic: this member is one consumer thread, `<consumer id>-0`.
        self.thread_id = thread_ids(self.consumer_id, 1)[0]
        self._backoff_s = self.config["rebalance.backoff.ms"] / 1000

        self._cv = threading.Condition()
        # Guarded by _cv:
        self._generation = 0  # bumped whenever ownership changes; stale fetches are dropped
        self._paused = True  # no hand-out (rebalancing, or not balanced yet)
        self._positions: dict[TopicPartition, int | None] = {}  # None: auto.offset.reset
        self._consumed: dict[TopicPartition, int] = {}  # processed: what commits write
        self._outstanding = False  # records handed out, not yet processed
        self._failure: RebalanceFailedError | None = None
        # Commits and rebalances do not interleave: a commit never writes the offset of a
        # partition released meanwhile.
        self._commit_lock = threading.Lock()
        self._committed: dict[TopicPartition, int] = {}
        self._owned: list[TopicPartition] = []

        self._wakeup = threading.Event()
        self._rebalance_wanted = False
        self._session_lost = False
        self._closing = threading.Event()
        self._closed = False

        self._zk = self._connect()
        try:
            servers = zk_group.bootstrap_servers(self._zk)
            if not servers:
                raise ConnectionError(
                    f"no broker is registered in {self.config['zookeeper.connect']}"
                )
            self._simple = SimpleConsumer(
                servers,
                self.config["client.id"] or self.group,
                self.config["socket.timeout.ms"] / 1000,
            )
            try:
                self._register()
                self._watch()
            except BaseException:
                self._simple.close()
                raise
        except BaseException:
            self._zk.stop()
            self._zk.close()
            raise
        self._thread = threading.Thread(
            target=self._run, name=f"zk-rebalancer-{self.consumer_id}", daemon=True
        )
        self._want_rebalance()
        self._thread.start()

    # -- the caller's API -----------------------------------------------------------------

    def poll(self, timeout_ms: int = 1000) -> list[ConsumerRecord]:
        """Records from the partitions this member owns, in offset order per partition;
        [] when none came within `timeout_ms`. Calling it again says the records it
        returned before are processed (their offsets may be committed)."""
        self._check_open()
        deadline = time.monotonic() + timeout_ms / 1000
        with self._cv:
            self._ack()
        while True:
            with self._cv:
                if self._failure is not None:
                    raise self._failure
                remaining = deadline - time.monotonic()
                if self._paused or not self._positions:
                    if remaining <= 0:
                        return []
                    self._cv.wait(remaining)
                    continue
                generation = self._generation
                positions = dict(self._positions)
            positions = self._reset_unknown(positions, generation)
            if not positions:  # no offset could be had yet (no leader): wait a little
                time.sleep(min(max(remaining, 0), self._backoff_s, 0.1))
                if time.monotonic() >= deadline:
                    return []
                continue
            max_wait_ms = max(0, min(self.config["fetch.wait.max.ms"], int(remaining * 1000)))
            requests = [
                FetchRequest(t, p, offset, self.config["fetch.message.max.bytes"])
                for (t, p), offset in sorted(positions.items())
            ]
            results = self._simple.fetch_many(requests, max_wait_ms, self.config["fetch.min.bytes"])
            with self._cv:
                records = self._take(results, positions, generation)
                if records:
                    self._outstanding = True
                    return records
            if time.monotonic() >= deadline:
                return []

    def __iter__(self) -> Iterator[ConsumerRecord]:
        """Records one at a time until close(); asking for the next record after the last
        of a poll's batch marks that batch processed."""
        while not self._closed:
            yield from self.poll()

    def commit(self) -> None:
        """Write the offsets of every record processed so far (all that poll() returned:
        the caller commits after handling them) to ZooKeeper. With auto.commit.enable
        false, the only way offsets are committed (as in Kafka 0.8)."""
        self._check_open()
        with self._cv:
            self._ack()
        self._commit_consumed()

    def assignment(self) -> list[TopicPartition]:
        """The partitions this member owns now (empty while it rebalances)."""
        with self._cv:
            return [] if self._paused else sorted(self._positions)

    def close(self) -> None:
        """Commit what was processed (with auto.commit.enable), release the partitions and
        leave the group."""
        if self._closed:
            return
        self._closed = True
        with self._cv:
            self._ack()
            self._cv.notify_all()
        self._closing.set()
        self._wakeup.set()
        self._thread.join()
        try:
            if self._zk.connected:
                with self._commit_lock:
                    if self.config["auto.commit.enable"]:
                        self._commit_locked()
                    self._release_all()
                try:
                    self._zk.delete(z.consumer_id_path(self.group, self.consumer_id))
                except NoNodeError:
                    pass
        except KazooException as exc:  # the session ends below anyway, and ephemerals go
            log.warning("%s: ZooKeeper failed during close: %s", self.consumer_id, exc)
        finally:
            self._zk.stop()
            self._zk.close()
            self._simple.close()

    def __enter__(self) -> ZkConsumer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- hand-out (under _cv) -----------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError(f"consumer {self.consumer_id} is closed")

    def _ack(self) -> None:
        """The caller is back: what it was handed is processed."""
        self._consumed.update(
            {key: offset for key, offset in self._positions.items() if offset is not None}
        )
        if self._outstanding:
            self._outstanding = False
            self._cv.notify_all()

    def _take(self, results, positions, generation) -> list[ConsumerRecord]:
        if generation != self._generation:
            return []  # ownership changed while fetching
        records: list[ConsumerRecord] = []
        for key, result in sorted(results.items()):
            if self._positions.get(key) != positions[key]:
                continue
            if result.error == ErrorCode.OFFSET_OUT_OF_RANGE:
                log.warning(
                    "%s: offset %d of %s-%d is out of range [%d, %d]; auto.offset.reset=%s",
                    self.consumer_id,
                    positions[key],
                    *key,
                    result.log_start_offset,
                    result.high_watermark,
                    self.config["auto.offset.reset"],
                )
                self._positions[key] = None
                continue
            if result.error != ErrorCode.NONE:
                # Retriable ones outlasted socket.timeout.ms; the next poll tries again.
                log.warning("%s: fetch of %s-%d: %s", self.consumer_id, *key, result.error.name)
                continue
            topic, partition = key
            records += [
                ConsumerRecord(topic, partition, *record, leader_epoch=-1)
                for record in result.records()
            ]
            self._positions[key] = result.next_offset
        return records

    def _reset_unknown(self, positions: dict, generation: int) -> dict[TopicPartition, int]:
        """Positions without a committed offset (or out of range) per auto.offset.reset;
        reset positions count as processed (a commit writes them)."""
        unknown = [key for key, offset in positions.items() if offset is None]
        if not unknown:
            return positions
        resolved = dict(positions)
        for topic, partition in unknown:
            try:
                if self.config["auto.offset.reset"] == "smallest":
                    offset = self._simple.earliest_offset(topic, partition)
                else:
                    offset = self._simple.latest_offset(topic, partition)
            except KafkaError as exc:
                log.warning(
                    "%s: no offset for %s-%d yet: %s", self.consumer_id, topic, partition, exc
                )
                del resolved[(topic, partition)]
                continue
            resolved[(topic, partition)] = offset
        with self._cv:
            if generation == self._generation:
                for key in unknown:
                    if key in resolved and self._positions.get(key, 0) is None:
                        self._positions[key] = self._consumed[key] = resolved[key]
        return resolved

    # -- ZooKeeper ----------------------------------------------------------------------------

    def _connect(self) -> KazooClient:
        client = KazooClient(
            hosts=self.config["zookeeper.connect"],
            timeout=self.config["zookeeper.session.timeout.ms"] / 1000,
            connection_retry={"max_tries": -1, "delay": 0.1, "max_delay": 1},
        )
        try:
            client.start(timeout=self.config["zookeeper.connection.timeout.ms"] / 1000)
        except KazooTimeoutError:
            client.close()
            raise ConnectionError(
                f"could not connect to ZooKeeper at {self.config['zookeeper.connect']} within "
                f"zookeeper.connection.timeout.ms={self.config['zookeeper.connection.timeout.ms']}"
            ) from None
        client.add_listener(self._on_session)
        return client

    def _register(self) -> None:
        """Create our ephemeral `ids/<consumer id>`. A znode of the same id left by a dead
        predecessor (a configured consumer.id) is waited out until its session expires."""
        path = z.consumer_id_path(self.group, self.consumer_id)
        data = z.encode_consumer_registration(
            z.ConsumerRegistration({t: 1 for t in self.topics}, now_ms())
        )
        deadline = time.monotonic() + 1.5 * self.config["zookeeper.session.timeout.ms"] / 1000
        while True:
            try:
                self._zk.create(path, data, ephemeral=True, makepath=True)
                return
            except NodeExistsError:
                try:
                    _, stat = self._zk.get(path)
                except NoNodeError:
                    continue
                if stat.ephemeralOwner == self._zk.client_id[0]:
                    return
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"consumer id {self.consumer_id} is registered in group {self.group} by a "
                    "live member (give each member its own consumer.id)"
                )
            time.sleep(0.2)

    def _watch(self) -> None:
        """Rebalance when members come and go, brokers come and go, or a topic appears or
        gets more partitions. The callbacks run on kazoo's thread: they only wake ours."""

        def children(_children):
            self._want_rebalance()

        def data(_data, _stat):
            self._want_rebalance()

        self._zk.ensure_path(z.consumer_ids_path(self.group))
        self._zk.ChildrenWatch(z.consumer_ids_path(self.group), children)
        self._zk.ChildrenWatch(z.BROKER_IDS, children)
        for topic in self.topics:
            self._zk.DataWatch(z.topic_path(topic), data)

    def _on_session(self, state: str) -> None:
        if state == KazooState.LOST:
            # Our ephemeral znodes are gone: others may own our partitions already. Stop
            # at once; what was not committed will be read again by the next owners.
            with self._cv:
                self._session_lost = True
                self._paused = True
                self._generation += 1
                self._positions.clear()
                self._consumed.clear()
                self._cv.notify_all()
        elif state == KazooState.CONNECTED:
            self._want_rebalance()

    def _want_rebalance(self) -> None:
        self._rebalance_wanted = True
        self._wakeup.set()

    # -- the rebalancer thread ------------------------------------------------------------------

    def _run(self) -> None:
        auto_commit = self.config["auto.commit.enable"]
        interval_s = self.config["auto.commit.interval.ms"] / 1000
        next_commit = time.monotonic() + interval_s
        while not self._closing.is_set():
            timeout = max(0.0, next_commit - time.monotonic()) if auto_commit else None
            self._wakeup.wait(timeout)
            self._wakeup.clear()
            if self._closing.is_set():
                return
            if self._rebalance_wanted:
                self._rebalance_wanted = False
                self._rebalance()
            if auto_commit and time.monotonic() >= next_commit:
                try:
                    self._commit_consumed()
                except KazooException as exc:
                    log.warning("%s: auto commit failed: %s", self.consumer_id, exc)
                next_commit = time.monotonic() + interval_s

    def _rebalance(self) -> None:
        retries = self.config["rebalance.max.retries"]
        for attempt in range(1, retries + 1):
            try:
                if self._rebalance_once():
                    return
            except (KazooException, z.ZkDataError) as exc:
                log.warning("%s: rebalance attempt %d: %s", self.consumer_id, attempt, exc)
            except Exception:  # a bug must not end the thread that rebalances
                log.exception("%s: rebalance attempt %d failed", self.consumer_id, attempt)
            if self._closing.wait(self._backoff_s):
                return
        failure = RebalanceFailedError(
            f"{self.consumer_id} could not rebalance group {self.group} after "
            f"{retries} attempts (rebalance.max.retries)"
        )
        log.error("%s", failure)
        with self._cv:
            self._failure = failure
            self._cv.notify_all()

    def _rebalance_once(self) -> bool:
        """One attempt: stop, commit, release, assign, claim. False on an ownership conflict
        (everything claimed is released again)."""
        with self._commit_lock:
            with self._cv:
                self._paused = True
                self._generation += 1
                # Records being processed right now: give the caller a moment to finish,
                # so their offsets are committed and the next owner does not repeat them.
                self._cv.wait_for(lambda: not self._outstanding, self._backoff_s)
            if self.config["auto.commit.enable"]:
                self._commit_locked()
            self._release_all()
            with self._cv:
                self._positions.clear()
                self._consumed.clear()
            if self._session_lost:
                self._session_lost = False
                self._register()

            subscriptions = {
                member: registration.subscription
                for member, registration in zk_group.members(self._zk, self.group).items()
            }
            if self.consumer_id not in subscriptions:
                raise KazooException(f"{self.consumer_id} is not registered (session lost?)")
            partitions = zk_group.topic_partitions(self._zk, self.topics)
            share = assign(partitions, subscriptions).get(self.thread_id, [])
            for topic, partition in share:
                if not zk_group.claim(self._zk, self.group, topic, partition, self.thread_id):
                    holder = zk_group.owner(self._zk, self.group, topic, partition)
                    log.info(
                        "%s: %s-%d is still owned by %s; releasing and retrying",
                        self.consumer_id,
                        topic,
                        partition,
                        holder,
                    )
                    self._release_all()
                    return False
                self._owned.append((topic, partition))
            offsets = {key: zk_group.committed_offset(self._zk, self.group, *key) for key in share}
            self._committed = {key: o for key, o in offsets.items() if o is not None}
            with self._cv:
                self._positions = dict(offsets)
                self._consumed = dict(self._committed)
                self._generation += 1
                self._paused = False
                self._failure = None
                self._cv.notify_all()
            log.info("%s: owns %s", self.consumer_id, share)
            return True

    def _commit_consumed(self) -> None:
        with self._commit_lock:
            self._commit_locked()

    def _commit_locked(self) -> None:
        with self._cv:
            offsets = {
                key: offset
                for key, offset in self._consumed.items()
                if key in self._owned and self._committed.get(key) != offset
            }
        if offsets:
            zk_group.commit_offsets(self._zk, self.group, offsets)
            self._committed.update(offsets)

    def _release_all(self) -> None:
        for topic, partition in self._owned:
            zk_group.release(self._zk, self.group, topic, partition, self.thread_id)
        self._owned = []
