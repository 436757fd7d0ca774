"""Where groups and committed offsets live: the partitions of __consumer_offsets this
broker leads, loaded into memory, and the records that keep them.

Kafka's GroupMetadataManager, in our terms. A broker coordinates the groups of the
offsets partitions it leads (docs/contracts/consumer-groups.md):
- on becoming leader of one it *loads* it: reads the partition from its start, keeps the
  latest group metadata and offset of each key, drops what tombstones deleted; meanwhile
  the groups of that partition answer COORDINATOR_LOAD_IN_PROGRESS. The read goes in
  chunks of `offsets.load.buffer.size`, other requests served in between.
- on losing leadership it *unloads* it: its groups are forgotten here (their waiting
  members are told NOT_COORDINATOR by the coordinator) and requests for them answer
  NOT_COORDINATOR, so clients look the coordinator up again.
- `write` appends records to a group's partition and reports when the in-sync replicas
  have them (broker/server/appends.py), so a commit is acknowledged only once it
  survives the loss of the leader.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from broker.coordinator.group import Group, GroupState, Member, PendingOffset
from broker.coordinator.offsets_topic import (
    OFFSETS_TOPIC,
    CommittedOffset,
    GroupKey,
    OffsetKey,
    decode_group_value,
    decode_key,
    decode_offset_value,
    encode_group_key,
    encode_group_value,
    encode_offset_key,
    encode_offset_value,
    partition_for,
)
from broker.log.loading import read_batches
from broker.protocol.errors import ErrorCode
from broker.protocol.types import DecodeError
from broker.records.batch import CorruptRecordError, build_batch, decode_batch
from broker.records.control import parse_marker
from broker.records.header import BatchHeader
from broker.server.appends import append_records
from broker.server.producer_state import INT32_MAX, ProducerStateTable

log = logging.getLogger(__name__)

# A record of the offsets topic: key and value (None: a tombstone).
OffsetsRecord = tuple[bytes, "bytes | None"]

# Append errors as a group request reports them (Kafka maps them the same way): the
# partition moved -> look the coordinator up again; replicas missing or slow -> retry.
_WRITE_ERRORS = {
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
    ErrorCode.KAFKA_STORAGE_ERROR: ErrorCode.NOT_COORDINATOR,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.REQUEST_TIMED_OUT: ErrorCode.COORDINATOR_NOT_AVAILABLE,
}


class GroupMetadataManager:
    def __init__(
        self,
        broker,
        num_partitions: int,
        commit_timeout_ms: int,
        load_buffer_bytes: int,
    ) -> None:
        self.broker = broker
        self.num_partitions = num_partitions
        self.commit_timeout_ms = commit_timeout_ms
        self.load_buffer_bytes = load_buffer_bytes
        self.groups: dict[str, Group] = {}
        # Loaded partitions whose groups we coordinate -> the leader epoch they were
        # loaded at.
        self.owned: dict[int, int] = {}
        # partition -> the leader epoch being loaded (a newer leadership restarts it)
        self.loading: dict[int, int] = {}
        # producer id -> groups with transactional commits pending in its transaction
        self.producer_groups: dict[int, set[str]] = {}
        # partition being loaded -> transaction ends (producer id, committed) to apply
        # once it is loaded
        self.completions_after_load: dict[int, list[tuple[int, bool]]] = {}
        # FindCoordinator is creating __consumer_offsets (once at a time).
        self.creating_topic = False
        # Told each group loaded (to start its members' sessions) or unloaded.
        self.on_loaded: Callable[[Group], None] = lambda group: None
        self.on_unloaded: Callable[[Group], None] = lambda group: None

    # -- which groups are ours ----------------------------------------------------------
    def partition_of(self, group_id: str) -> int:
        return partition_for(group_id, self.num_partitions)

    def status(self, group_id: str) -> ErrorCode:
        """NONE if this broker coordinates the group now, else what the client is told."""
        p = self.partition_of(group_id)
        if p in self.loading:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        if p not in self.owned:
            return ErrorCode.NOT_COORDINATOR
        return ErrorCode.NONE

    def any_loading(self) -> bool:
        return bool(self.loading)

    def get(self, group_id: str) -> Group | None:
        return self.groups.get(group_id)

    def add(self, group: Group) -> Group:
        return self.groups.setdefault(group.group_id, group)

    def remove(self, group_id: str) -> None:
        self.groups.pop(group_id, None)

    # -- writes -----------------------------------------------------------------------
    def end_offset(self, group_id: str) -> int:
        """Where the next records of the group's partition land (-1: not hosted here).
        Appends are synchronous, so this is the offset of the next `write`'s batch."""
        partition = self.broker.replicas.get(OFFSETS_TOPIC, self.partition_of(group_id))
        return -1 if partition is None else partition.log.log_end_offset

    def write(
        self,
        group_id: str,
        records: list[OffsetsRecord],
        on_done: Callable[[ErrorCode], None],
        too_large: ErrorCode = ErrorCode.UNKNOWN_SERVER_ERROR,
        producer: tuple[int, int] | None = None,
    ) -> None:
        """Append `records` to the group's partition; `on_done(error)` once the in-sync
        replicas have them (NONE) or why not, as a group request reports it (`too_large`
        for records over the partition's max.message.bytes: Kafka answers a commit
        INVALID_COMMIT_OFFSET_SIZE, a group write UNKNOWN_SERVER_ERROR). With `producer`
        (id, epoch) the batch is transactional: a TxnOffsetCommit's, which the log fences
        by epoch and the transaction's marker later commits or aborts."""
        p = self.partition_of(group_id)
        hosted = self.broker.replicas.get(OFFSETS_TOPIC, p)
        if p not in self.owned or hosted is None:
            on_done(ErrorCode.NOT_COORDINATOR)
            return
        now = self.broker.now_ms()
        entries = [(key, value, now, ()) for key, value in records]
        if producer is None:
            batch = build_batch(entries)
        else:
            producer_id, epoch = producer
            batch = build_batch(
                entries,
                producer_id=producer_id,
                producer_epoch=epoch,
                base_sequence=_next_sequence(hosted.producers, producer_id, epoch),
                transactional=True,
            )
        operation = append_records(self.broker, OFFSETS_TOPIC, p, batch, self.commit_timeout_ms)

        def done(outcome) -> None:
            code, message = (
                outcome if isinstance(outcome, tuple) else (ErrorCode.UNKNOWN_SERVER_ERROR, None)
            )
            if code != ErrorCode.NONE:
                log.warning(
                    "writing group %s to %s-%d failed: %s %s",
                    group_id,
                    OFFSETS_TOPIC,
                    p,
                    code.name,
                    message or "",
                )
            if code in (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE):
                code = too_large
            on_done(_WRITE_ERRORS.get(code, code))

        operation.add_done_callback(done)

    # -- transactional commits -----------------------------------------------------------
    def track_producer(self, producer_id: int, group_id: str) -> None:
        """The group has commits pending in the producer's transaction."""
        self.producer_groups.setdefault(producer_id, set()).add(group_id)

    def _untrack_producer(self, producer_id: int, group_id: str) -> None:
        groups = self.producer_groups.get(producer_id)
        if groups is not None:
            groups.discard(group_id)
            if not groups:
                del self.producer_groups[producer_id]

    def complete_transaction(self, index: int, producer_id: int, committed: bool) -> int:
        """The producer's COMMIT/ABORT marker is on offsets partition `index`: apply or
        drop its pending commits of the groups there. A partition being loaded applies
        it once loaded (the marker may lie past what the load reads). Returns how many
        offsets were applied."""
        if index in self.loading:
            log.debug(
                "%s-%d: marker of producer %d (%s) while loading: applied once loaded",
                OFFSETS_TOPIC,
                index,
                producer_id,
                "COMMIT" if committed else "ABORT",
            )
            self.completions_after_load.setdefault(index, []).append((producer_id, committed))
            return 0
        applied = 0
        for group_id in list(self.producer_groups.get(producer_id, ())):
            if self.partition_of(group_id) != index:
                continue
            self._untrack_producer(producer_id, group_id)
            group = self.groups.get(group_id)
            if group is not None and not group.is_(GroupState.DEAD):
                applied += group.complete_txn_offsets(producer_id, committed)
        log.debug(
            "%s-%d: the %s marker of producer %d applied %d pending offsets",
            OFFSETS_TOPIC,
            index,
            "COMMIT" if committed else "ABORT",
            producer_id,
            applied,
        )
        return applied

    @staticmethod
    def offset_record(
        group_id: str, topic: str, partition: int, committed: CommittedOffset | None
    ) -> OffsetsRecord:
        key = encode_offset_key(group_id, topic, partition)
        return key, None if committed is None else encode_offset_value(committed)

    @staticmethod
    def group_record(group: Group, assignments: dict[str, bytes] | None = None) -> OffsetsRecord:
        """The group's metadata as it stands (with `assignments` for its members in
        place of the current ones, for the leader's SyncGroup being stored)."""
        members = []
        if group.protocol_name is not None:
            for member in group.members.values():
                members.append(
                    {
                        "member_id": member.member_id,
                        "group_instance_id": member.group_instance_id,
                        "client_id": member.client_id,
                        "client_host": member.client_host,
                        "rebalance_timeout": member.rebalance_timeout_ms,
                        "session_timeout": member.session_timeout_ms,
                        "subscription": member.metadata(group.protocol_name),
                        "assignment": (assignments or {}).get(member.member_id, member.assignment),
                    }
                )
        value = encode_group_value(
            {
                "protocol_type": group.protocol_type or "",
                "generation": group.generation_id,
                "protocol": group.protocol_name,
                "leader": group.leader_id,
                "current_state_timestamp": group.state_timestamp_ms,
                "members": members,
            }
        )
        return encode_group_key(group.group_id), value

    @staticmethod
    def group_tombstone(group_id: str) -> OffsetsRecord:
        return encode_group_key(group_id), None

    # -- leadership of offsets partitions -------------------------------------------------
    def leadership_changed(self, topic: str, index: int) -> None:
        """A partition's leadership changed here: load the offsets partitions we now
        lead, unload the ones we no longer do."""
        if topic != OFFSETS_TOPIC:
            return
        partition = self.broker.replicas.get(topic, index)
        if partition is not None and partition.is_leader:
            if index in self.owned or index in self.loading:
                # Still the leader under a newer epoch (the controller bumps it when a
                # follower leaves the ISR): the groups in memory are current, as in Kafka.
                return
            epoch = partition.leader_epoch
            self.loading[index] = epoch
            self.broker.spawn(self._load(index, epoch))
        else:
            self.loading.pop(index, None)
            self.completions_after_load.pop(index, None)
            self._unload(index)

    def _unload(self, index: int) -> None:
        if index not in self.owned:
            return
        del self.owned[index]
        for group in [g for g in self.groups.values() if self.partition_of(g.group_id) == index]:
            del self.groups[group.group_id]
            for producer_id in group.pending_txn_offsets:
                self._untrack_producer(producer_id, group.group_id)
            if group.state is not GroupState.DEAD:
                group.transition(GroupState.DEAD, self.broker.now_ms())
            self.on_unloaded(group)
        log.info("unloaded the groups of %s-%d", OFFSETS_TOPIC, index)

    async def _load(self, index: int, epoch: int) -> None:
        try:
            loaded = await self._read_partition(index, epoch)
        except Exception:
            log.exception(
                "loading %s-%d failed; its groups stay unavailable until its next leadership",
                OFFSETS_TOPIC,
                index,
            )
            if self.loading.get(index) == epoch:
                del self.loading[index]
                self.completions_after_load.pop(index, None)
            return
        if self.loading.get(index) != epoch:
            return  # lost or re-won leadership while reading: that load decides
        now = self.broker.now_ms()
        groups = build_groups(loaded, now)
        for group in groups:
            self.groups[group.group_id] = group
            for producer_id in group.pending_txn_offsets:
                self.track_producer(producer_id, group.group_id)
        del self.loading[index]
        self.owned[index] = epoch
        for producer_id, committed in self.completions_after_load.pop(index, []):
            self.complete_transaction(index, producer_id, committed)
        for group in groups:
            self.on_loaded(group)
        pending = sorted({p for g in groups for p in g.pending_txn_offsets})
        log.info(
            "loaded %d groups from %s-%d (leader epoch %d)%s",
            len(groups),
            OFFSETS_TOPIC,
            index,
            epoch,
            # Commits waiting for a marker: OffsetFetch answers UNSTABLE_OFFSET_COMMIT for
            # them (require_stable) until it comes.
            f"; transactional offsets pending for producers {pending}" if pending else "",
        )

    async def _read_partition(self, index: int, epoch: int) -> LoadedPartition:
        """The latest group metadata and offsets of the partition, chunk by chunk."""
        loaded = LoadedPartition()

        def current_log():
            partition = self.broker.replicas.get(OFFSETS_TOPIC, index)
            return None if partition is None else partition.log

        batches = read_batches(
            current_log, lambda: self.loading.get(index) == epoch, self.load_buffer_bytes
        )
        async for batch in batches:
            loaded.apply_batch(batch.data, batch.pos, batch.header, index)
        return loaded


# A loaded offset record: the commit (None: a tombstone) and its batch's offset.
_Seen = tuple["CommittedOffset | None", int]


class LoadedPartition:
    """What reading an offsets partition from its start leaves: per key the latest
    record, and per producer the transactional commits whose marker was not read yet
    (docs/contracts/consumer-groups.md, "Transactional offsets")."""

    def __init__(self) -> None:
        self.groups: dict[str, dict | None] = {}
        self.offsets: dict[OffsetKey, _Seen] = {}
        self.pending: dict[int, dict[OffsetKey, _Seen]] = {}

    def apply_batch(self, data, pos: int, header: BatchHeader, index: int) -> None:
        if header.is_control:
            self._end_transaction(data, pos, header)
            return
        producer_id = header.producer_id if header.is_transactional else None
        for record in decode_batch(data, pos)[1]:
            self._apply_record(record.key, record.value, header.base_offset, producer_id, index)

    def _end_transaction(self, data, pos: int, header: BatchHeader) -> None:
        """A COMMIT marker applies the producer's pending commits, unless a later plain
        commit of the partition was read; ABORT drops them (Kafka's load does the same)."""
        pending = self.pending.pop(header.producer_id, {})
        marker = parse_marker(data, pos, header)
        if marker is None or marker.is_abort:
            return
        for key, (committed, batch) in pending.items():
            seen = self.offsets.get(key)
            if seen is None or seen[0] is None or seen[1] < batch:
                self.offsets[key] = (committed, batch)

    def _apply_record(self, key, value, batch: int, producer_id: int | None, index: int) -> None:
        if key is None:
            log.warning("%s-%d: a record without a key, skipped", OFFSETS_TOPIC, index)
            return
        try:
            decoded = decode_key(bytes(key))
            if isinstance(decoded, OffsetKey):
                committed = None if value is None else decode_offset_value(bytes(value))
                if producer_id is None:
                    self.offsets[decoded] = (committed, batch)
                elif committed is None:
                    self.pending.get(producer_id, {}).pop(decoded, None)
                else:
                    self.pending.setdefault(producer_id, {})[decoded] = (committed, batch)
            elif isinstance(decoded, GroupKey):
                self.groups[decoded.group] = (
                    None if value is None else decode_group_value(bytes(value))
                )
        except (DecodeError, CorruptRecordError) as exc:
            log.warning(
                "%s-%d: a record that does not decode, skipped: %s", OFFSETS_TOPIC, index, exc
            )


def _next_sequence(producers: ProducerStateTable, producer_id: int, epoch: int) -> int:
    """The base sequence of the coordinator's transactional batch. Kafka appends
    coordinator batches without sequence checks; our partitions check every producer
    batch, so the batch continues the producer's sequence in this partition (0 for a
    producer new here or at a new epoch), which the check takes as in order."""
    entry = producers.producers.get(producer_id)
    if entry is None or entry.epoch != epoch or entry.last_seq is None:
        return 0
    return 0 if entry.last_seq >= INT32_MAX else entry.last_seq + 1


def build_groups(loaded: LoadedPartition, now_ms: int) -> list[Group]:
    """Groups as the records left them: a group with members is Stable (its members'
    sessions restart now), one without is Empty; offsets without group metadata belong
    to a group that only commits (no protocol type); transactional commits whose marker
    was not read stay pending."""
    groups: dict[str, Group] = {}
    for group_id, value in loaded.groups.items():
        if value is None:
            continue
        group = Group(group_id, generation_id=value["generation"])
        group.protocol_type = value["protocol_type"] or None
        group.protocol_name = value["protocol"]
        group.state_timestamp_ms = value["current_state_timestamp"]
        for m in value["members"]:
            member = Member(
                member_id=m["member_id"],
                group_instance_id=m["group_instance_id"],
                client_id=m["client_id"],
                client_host=m["client_host"],
                rebalance_timeout_ms=m["rebalance_timeout"]
                if m["rebalance_timeout"] >= 0
                else m["session_timeout"],
                session_timeout_ms=m["session_timeout"],
                protocol_type=group.protocol_type or "",
                protocols=[(group.protocol_name or "", m["subscription"])],
                assignment=m["assignment"],
                session_deadline_ms=now_ms + m["session_timeout"],
            )
            group.members[member.member_id] = member
            if member.group_instance_id is not None:
                group.static_members[member.group_instance_id] = member.member_id
        group.leader_id = (
            value["leader"] if value["leader"] in group.members else next(iter(group.members), None)
        )
        group.state = GroupState.STABLE if group.members else GroupState.EMPTY
        groups[group_id] = group

    def group_of(group_id: str) -> Group:
        group = groups.get(group_id)
        if group is None:
            group = groups[group_id] = Group(group_id)
        return group

    for key, (committed, batch) in loaded.offsets.items():
        if committed is not None:
            group_of(key.group).store_offset((key.topic, key.partition), committed, batch)
    for producer_id, pending in loaded.pending.items():
        for key, (committed, batch) in pending.items():
            group = group_of(key.group)
            group.pending_txn_offsets.setdefault(producer_id, {})[(key.topic, key.partition)] = (
                PendingOffset(committed, batch)
            )
    return list(groups.values())
