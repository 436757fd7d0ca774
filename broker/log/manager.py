"""All the partition logs of a broker, spread over its log directories.

Each log dir holds `<topic>-<partition>/` directories and three checkpoint files
(see checkpoint.py). Start-up recovers every log from its checkpointed recovery point;
after a clean shutdown that point equals the log end, so only the active segment is
re-read. The broker calls `tick` from its event loop for the time-driven duties.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path

from broker.cluster import TopicPartition
from broker.log.checkpoint import (
    HIGH_WATERMARK_FILE,
    LEADER_EPOCH_FILE,
    LOG_START_OFFSET_FILE,
    RECOVERY_POINT_FILE,
    read_checkpoint,
    write_checkpoint,
)
from broker.log.config import LONG_MAX, LogConfig
from broker.log.flusher import ThreadFlusher, run_inline
from broker.log.log import KafkaStorageError, Log
from broker.util import clock
from broker.util.files import fsync_dir

log = logging.getLogger(__name__)

DELETE_DIR_SUFFIX = "-delete"
# log.retention.check.interval.ms default.
RETENTION_CHECK_INTERVAL_MS = 300_000
# How long one tick may spend writing leader-epoch files (about a second apart): a
# failover's thousands of files (~0.2-1 ms each) are written over the next seconds in
# slices, so the Metadata and Fetch requests that follow it are not held up behind them.
EPOCH_WRITES_PER_TICK_S = 0.05


def parse_log_dir_name(name: str) -> TopicPartition | None:
    """`<topic>-<partition>`; topics may contain '-', so split on the last one."""
    topic, sep, partition = name.rpartition("-")
    if not sep or not topic or not partition.isdigit():
        return None
    return topic, int(partition)


class LogManager:
    def __init__(
        self,
        log_dirs: list[Path],
        default_config: LogConfig,
        now_ms: Callable[[], int] = clock.now_ms,
        retention_check_interval_ms: int = RETENTION_CHECK_INTERVAL_MS,
        background_flush: bool = False,
        fsync: Callable[[int], None] = os.fsync,
    ) -> None:
        """`background_flush`: the logs' fsyncs and the checkpoints run on one thread
        per log dir (the broker's event loop never waits on its disks; README "Flushes
        and the event loop"); `fsync` is what that thread syncs with (tests slow it)."""
        if not log_dirs:
            raise ValueError("at least one log dir is needed")
        self.log_dirs = [Path(d) for d in log_dirs]
        self.default_config = default_config
        self.retention_check_interval_ms = retention_check_interval_ms
        self._now_ms = now_ms
        self._logs: dict[TopicPartition, Log] = {}
        self._dir_of: dict[TopicPartition, Path] = {}
        self._topic_configs: dict[str, LogConfig] = {}
        # Deleted logs whose files wait for file_delete_delay_ms.
        self._deleting: list[Log] = []
        self._high_watermarks: dict[TopicPartition, int] = {}
        # Partitions per log dir (where `create` puts the next one).
        self._counts: dict[Path, int] = {d: 0 for d in self.log_dirs}
        # Log dirs that gained a partition directory since their last fsync: the first
        # flush of any log created meanwhile syncs it once for all of them (`_sync_dir`).
        self._unsynced_dirs: set[Path] = set()
        # What each checkpoint file was last written with (`checkpoint` skips equal ones).
        self._checkpointed: dict[Path, dict[TopicPartition, int]] = {}
        # Logs whose leader epochs changed since their file was last written, oldest
        # first (a dict as an ordered set): `tick` writes them in slices, off the path of
        # the LeaderAndIsr that changed them (leader_epoch.py; docs/contracts/log.md,
        # "Leader epochs").
        self._dirty_epochs: dict[Log, None] = {}
        self.epoch_files_written = 0
        self._last_retention_check = now_ms()
        # Told the seconds each log flush took (the broker's metrics).
        self.on_flush: Callable[[float], None] = lambda seconds: None
        # Told the name of each checkpoint file written (the broker's metrics).
        self.on_checkpoint_written: Callable[[str], None] = lambda name: None
        # Log dirs taken offline by an I/O error (Kafka's LogDirFailureChannel): nothing
        # in them is read or written again until a restart (docs/contracts/log.md, "Log
        # directory failure").
        self.offline_dirs: set[Path] = set()
        # Told each log dir once, when it goes offline (the replica manager).
        self.on_dir_failed: Callable[[Path], None] = lambda path: None
        # Told a partition whose background flush returned (the produce purgatory).
        self.on_durable: Callable[[TopicPartition], None] = lambda tp: None
        self._flushers: dict[Path, ThreadFlusher] = {}
        # Logs that may have work for the tick (`Log.on_due`), in the order they said so.
        self._due: dict[Log, None] = {}
        if background_flush:
            self._flushers = {
                d: ThreadFlusher(f"log-flusher-{i}", fsync) for i, d in enumerate(self.log_dirs)
            }

    # -- start-up ---------------------------------------------------------------------
    def load(self, topic_configs: dict[str, LogConfig] | None = None) -> None:
        """Open (and recover) every partition directory of every log dir."""
        self._topic_configs.update(topic_configs or {})
        for log_dir in self.log_dirs:
            log_dir.mkdir(parents=True, exist_ok=True)
            recovery_points = read_checkpoint(log_dir / RECOVERY_POINT_FILE)
            start_offsets = read_checkpoint(log_dir / LOG_START_OFFSET_FILE)
            high_watermarks = read_checkpoint(log_dir / HIGH_WATERMARK_FILE)
            self._high_watermarks.update(high_watermarks)
            self._checkpointed[log_dir / RECOVERY_POINT_FILE] = recovery_points
            self._checkpointed[log_dir / LOG_START_OFFSET_FILE] = start_offsets
            self._checkpointed[log_dir / HIGH_WATERMARK_FILE] = high_watermarks
            for name in sorted(os.listdir(log_dir)):
                path = log_dir / name
                if not path.is_dir():
                    continue
                if name.endswith(DELETE_DIR_SUFFIX):
                    # A deletion interrupted by a restart: no fetch can hold its files now.
                    shutil.rmtree(path, ignore_errors=True)
                    continue
                key = parse_log_dir_name(name)
                if key is None:
                    log.warning("ignoring %s: not a <topic>-<partition> directory", path)
                    continue
                if key in self._logs:
                    raise RuntimeError(
                        f"{key[0]}-{key[1]} is in both {self._dir_of[key]} and {log_dir}"
                    )
                self._logs[key] = Log.open(
                    path,
                    key[0],
                    key[1],
                    self._config_for(key[0]),
                    recovery_point=recovery_points.get(key, 0),
                    now_ms=self._now_ms,
                    log_start_offset=start_offsets.get(key, 0),
                )
                self._logs[key].on_flush = self._flushed
                self._watch(self._logs[key], log_dir)
                self._track_epochs(self._logs[key])
                self._dir_of[key] = log_dir
                self._counts[log_dir] += 1
        # Recovery flushed every log to its end: record that before anything else happens.
        self.checkpoint()

    def high_watermarks(self) -> dict[TopicPartition, int]:
        """The high watermarks checkpointed before the last shutdown (or last checkpoint)."""
        return dict(self._high_watermarks)

    # -- the logs ---------------------------------------------------------------------
    def get(self, topic: str, partition: int) -> Log | None:
        return self._logs.get((topic, partition))

    def logs(self) -> list[Log]:
        return list(self._logs.values())

    def create(self, topic: str, partition: int, config: LogConfig | None = None) -> Log:
        """The log of a new partition, in the log dir holding the fewest partitions;
        `config` becomes the topic's config. An existing log is returned as it is.

        Costs no fsync and nothing that grows with the partitions already here (one
        LeaderAndIsr may create thousands): see `Log.open` for what becomes durable when."""
        if config is not None and config != self._config_for(topic):
            self.set_topic_config(topic, config)
        key = (topic, partition)
        existing = self._logs.get(key)
        if existing is not None:
            return existing
        online = [d for d in self.log_dirs if d not in self.offline_dirs]
        if not online:
            raise KafkaStorageError(f"{topic}-{partition}: every log dir is offline")
        log_dir = min(online, key=self._counts.__getitem__)
        try:
            created = Log.open(
                log_dir / f"{topic}-{partition}",
                topic,
                partition,
                self._config_for(topic),
                now_ms=self._now_ms,
            )
        except OSError as exc:
            self.dir_failed(log_dir, exc)
            raise KafkaStorageError(f"{topic}-{partition}: {log_dir} failed: {exc}") from exc
        created.on_flush = self._flushed
        self._watch(created, log_dir)
        self._track_epochs(created)
        self._unsynced_dirs.add(log_dir)
        created.sync_parent = lambda sync=None: self._sync_dir(log_dir, sync)
        self._logs[key] = created
        self._dir_of[key] = log_dir
        self._counts[log_dir] += 1
        return created

    def _watch(self, each: Log, log_dir: Path) -> None:
        each.on_io_error = lambda exc: self.dir_failed(log_dir, exc)
        each.on_due = self._due.setdefault
        self._due.setdefault(each)  # the first tick looks once at what it holds
        each.flusher = self._flushers.get(log_dir)
        key = (each.topic, each.partition)
        each.on_durable = lambda: self.on_durable(key)

    # -- log directory failure ------------------------------------------------------------
    def dir_failed(self, log_dir: Path, exc: OSError) -> None:
        """An I/O error (disk full, EIO, read-only...) in `log_dir`: the whole dir goes
        offline, as Kafka's LogDirFailureChannel takes it: its logs refuse every read and
        write from now on (KafkaStorageError), whatever state the failed write left
        behind is repaired by the recovery at the next start. Idempotent."""
        log_dir = Path(log_dir)
        if log_dir in self.offline_dirs:
            return
        self.offline_dirs.add(log_dir)
        log.error("log dir %s is offline: %s", log_dir, exc)
        for key, where in self._dir_of.items():
            if where == log_dir:
                self._logs[key].offline = True
                self._dirty_epochs.pop(self._logs[key], None)
        self.on_dir_failed(log_dir)

    def is_offline(self, topic: str, partition: int) -> bool:
        where = self._dir_of.get((topic, partition))
        return where is not None and where in self.offline_dirs

    @property
    def all_dirs_offline(self) -> bool:
        return set(self.log_dirs) <= self.offline_dirs

    def _online_logs(self) -> list[Log]:
        return [each for each in self._logs.values() if not each.offline]

    def _track_epochs(self, each: Log) -> None:
        epochs = each.leader_epochs
        epochs.on_dirty = lambda _: self._dirty_epochs.setdefault(each)
        if epochs.dirty:  # changed while opening (cut to the recovered log)
            self._dirty_epochs[each] = None

    def _sync_dir(self, log_dir: Path, sync=None) -> None:
        """fsync `log_dir` if it gained partition directories since it was last synced
        (with a deferred `sync`, the dir's flusher thread does it before any later job
        of the dir returns)."""
        if log_dir in self._unsynced_dirs:
            fsync_dir(log_dir, sync)
            self._unsynced_dirs.discard(log_dir)

    def _flushed(self, seconds: float) -> None:
        self.on_flush(seconds)

    def set_topic_config(self, topic: str, config: LogConfig | None) -> None:
        """Per-topic overrides (None: back to the default), applied to its logs at once."""
        if config is None:
            self._topic_configs.pop(topic, None)
        else:
            self._topic_configs[topic] = config
        for (t, _), topic_log in self._logs.items():
            if t == topic:
                topic_log.config = self._config_for(topic)

    def delete_partition(self, topic: str, partition: int) -> bool:
        """Delete one local partition (its files go after file_delete_delay_ms)."""
        key = (topic, partition)
        doomed = self._logs.pop(key, None)
        if doomed is None:
            return False
        self._counts[self._dir_of.pop(key)] -= 1
        self._high_watermarks.pop(key, None)
        self._dirty_epochs.pop(doomed, None)
        doomed.delete()
        if doomed.pending_deletions:
            self._deleting.append(doomed)
        return True

    def delete_topic(self, topic: str) -> int:
        """Delete every local partition of `topic`; returns how many there were."""
        keys = [k for k in self._logs if k[0] == topic]
        for key in keys:
            doomed = self._logs.pop(key)
            self._dirty_epochs.pop(doomed, None)
            self._counts[self._dir_of.pop(key)] -= 1
            self._high_watermarks.pop(key, None)
            doomed.delete()
            if doomed.pending_deletions:
                self._deleting.append(doomed)
        self._topic_configs.pop(topic, None)
        return len(keys)

    def _config_for(self, topic: str) -> LogConfig:
        return self._topic_configs.get(topic, self.default_config)

    # -- background duties ------------------------------------------------------------
    @property
    def due_logs(self) -> int:
        """How many logs the next tick looks at (what the tests bound)."""
        return len(self._due)

    def tick(self, now_ms: int | None = None) -> None:
        """Flush rolled segments and logs due by flush_interval_ms, apply retention every
        retention_check_interval_ms, finish delayed deletions, and write a slice of the
        leader-epoch files changed since they were last written."""
        now = self._now_ms() if now_ms is None else now_ms
        if now - self._last_retention_check >= self.retention_check_interval_ms:
            self._last_retention_check = now
            for each in self._online_logs():
                with suppress(KafkaStorageError):
                    each.delete_expired(now)
        # Once a second over the logs that said they may have work (`Log.on_due`), not
        # over every partition: 10,000 idle partitions cost a walk of them all each second.
        for each in list(self._due):
            if each.offline or each.deleted:  # its dir failed, or it is gone
                self._due.pop(each, None)
                continue
            with suppress(KafkaStorageError):
                if each.has_unflushed_sealed_segments:
                    # Kafka flushes a rolled segment right after the roll.
                    each.flush(each.active_segment.base_offset)
                timed = each.config.flush_interval_ms != LONG_MAX
                if (
                    timed
                    and each.log_end_offset > each.recovery_point
                    and now - each.last_flush_ms >= each.config.flush_interval_ms
                ):
                    each.flush()
                if each.pending_deletions:
                    each.collect_deleted(now)
                if not (
                    each.has_unflushed_sealed_segments
                    or each.pending_deletions
                    or (timed and each.log_end_offset > each.recovery_point)
                ):
                    # Nothing left; a background flush still under way keeps it here
                    # (its recovery point moves when the flush returns).
                    self._due.pop(each, None)
        still_deleting = []
        for doomed in self._deleting:
            doomed.collect_deleted(now)
            if doomed.pending_deletions:
                still_deleting.append(doomed)
        self._deleting = still_deleting
        # After the flushes, which write the files of the logs they flush themselves.
        if self._dirty_epochs:
            self.write_leader_epochs(EPOCH_WRITES_PER_TICK_S)

    # -- checkpoints and shutdown -----------------------------------------------------
    def checkpoint(self, high_watermarks: dict[TopicPartition, int] | None = None) -> None:
        """Write each log dir's recovery points and log start offsets, and its high
        watermarks when given. A file whose entries are those it was last written with
        is left alone: an idle broker rewrites (and fsyncs) nothing."""
        if high_watermarks is not None:
            self._high_watermarks = {k: v for k, v in high_watermarks.items() if k in self._logs}
        for log_dir in self.log_dirs:
            if log_dir in self.offline_dirs:
                continue
            here = {k: v for k, v in self._logs.items() if self._dir_of[k] == log_dir}
            files = {
                log_dir / RECOVERY_POINT_FILE: {k: v.recovery_point for k, v in here.items()},
                log_dir / LOG_START_OFFSET_FILE: {k: v.log_start_offset for k, v in here.items()},
            }
            if high_watermarks is not None:
                files[log_dir / HIGH_WATERMARK_FILE] = {
                    k: hw for k, hw in high_watermarks.items() if k in here
                }
            # Only this manager writes these files while it runs, so what it wrote last
            # is what they hold (or will, once the dir's flusher wrote them).
            changed = {p: o for p, o in files.items() if self._checkpointed.get(p) != o}
            if not changed:
                continue
            self._checkpointed.update(changed)
            self._write_checkpoints(log_dir, changed)

    def _write_checkpoints(self, log_dir: Path, changed: dict[Path, dict]) -> None:
        """Write (temp file, fsync, rename, fsync of the dir) on the dir's flusher thread
        when there is one: after every flush submitted before, so the recovery points
        written are durable ones."""

        def write() -> None:
            for path, offsets in changed.items():
                write_checkpoint(path, offsets)

        def done(error: BaseException | None, seconds: float) -> None:
            if isinstance(error, OSError):
                self.dir_failed(log_dir, error)
                return
            for path in changed:
                self.on_checkpoint_written(path.name)

        flusher = self._flushers.get(log_dir)
        if flusher is None:
            run_inline(write, done)
        else:
            flusher.submit(write, done)

    @property
    def leader_epoch_files_pending(self) -> int:
        """Leader-epoch files changed in memory and not yet written (the ticks write them
        in slices: after a create or failover of thousands of partitions, for a while)."""
        return len(self._dirty_epochs)

    def write_leader_epochs(self, budget_s: float | None = None) -> int:
        """Write (without fsyncs) the leader-epoch files whose cache changed since they
        were last written, oldest change first, all of them or until `budget_s` seconds
        have gone; a flush or close may have written some already. Returns how many
        were written."""
        written = 0
        dirty = self._dirty_epochs
        deadline = None if budget_s is None else time.perf_counter() + budget_s
        while dirty:
            each = next(iter(dirty))
            del dirty[each]
            if each.offline:
                continue
            try:
                if each.deleted or not each.leader_epochs.write():
                    continue
            except OSError as exc:
                each.on_io_error(exc)  # its dir goes offline: never written again
                continue
            written += 1
            self.epoch_files_written += 1
            self.on_checkpoint_written(LEADER_EPOCH_FILE)
            if deadline is not None and time.perf_counter() >= deadline:
                break
        return written

    def close(self, high_watermarks: dict[TopicPartition, int] | None = None) -> None:
        """Flush every log, checkpoint (recovery points = log ends) and close the files.
        The flusher threads finish their jobs first; what follows runs here."""
        flushers, self._flushers = self._flushers, {}
        for flusher in flushers.values():
            flusher.shutdown()
        for each in self._logs.values():
            each.flusher = None
        for each in self._online_logs():
            with suppress(KafkaStorageError):
                each.flush()
        self.checkpoint(high_watermarks)
        for each in self._logs.values():
            with suppress(KafkaStorageError):
                each.close()
        for doomed in self._deleting:
            doomed.close()
        self._deleting = []
