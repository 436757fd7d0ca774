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

import asyncio
import logging
from collections.abc import Callable

from broker.coordinator.group import Group, GroupState, Member
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
from broker.log.log import OffsetOutOfRange
from broker.protocol.errors import ErrorCode
from broker.protocol.types import DecodeError
from broker.records.batch import CorruptRecordError, build_batch, iter_batches, iter_records
from broker.server.appends import append_records

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
    def write(
        self,
        group_id: str,
        records: list[OffsetsRecord],
        on_done: Callable[[ErrorCode], None],
        too_large: ErrorCode = ErrorCode.UNKNOWN_SERVER_ERROR,
    ) -> None:
        """Append `records` to the group's partition; `on_done(error)` once the in-sync
        replicas have them (NONE) or why not, as a group request reports it (`too_large`
        for records over the partition's max.message.bytes: Kafka answers a commit
        INVALID_COMMIT_OFFSET_SIZE, a group write UNKNOWN_SERVER_ERROR)."""
        p = self.partition_of(group_id)
        if p not in self.owned:
            on_done(ErrorCode.NOT_COORDINATOR)
            return
        now = self.broker.now_ms()
        batch = build_batch([(key, value, now, ()) for key, value in records])
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
            self._unload(index)

    def _unload(self, index: int) -> None:
        if index not in self.owned:
            return
        del self.owned[index]
        for group in [g for g in self.groups.values() if self.partition_of(g.group_id) == index]:
            del self.groups[group.group_id]
            if group.state is not GroupState.DEAD:
                group.transition(GroupState.DEAD, self.broker.now_ms())
            self.on_unloaded(group)
        log.info("unloaded the groups of %s-%d", OFFSETS_TOPIC, index)

    async def _load(self, index: int, epoch: int) -> None:
        try:
            groups_seen, offsets_seen = await self._read_partition(index, epoch)
        except Exception:
            log.exception(
                "loading %s-%d failed; its groups stay unavailable until its next leadership",
                OFFSETS_TOPIC,
                index,
            )
            if self.loading.get(index) == epoch:
                del self.loading[index]
            return
        if self.loading.get(index) != epoch:
            return  # lost or re-won leadership while reading: that load decides
        now = self.broker.now_ms()
        loaded = build_groups(groups_seen, offsets_seen, now)
        for group in loaded:
            self.groups[group.group_id] = group
        del self.loading[index]
        self.owned[index] = epoch
        for group in loaded:
            self.on_loaded(group)
        log.info(
            "loaded %d groups from %s-%d (leader epoch %d)",
            len(loaded),
            OFFSETS_TOPIC,
            index,
            epoch,
        )

    async def _read_partition(self, index: int, epoch: int):
        """The latest group metadata and offsets of the partition, chunk by chunk."""
        groups_seen: dict[str, dict | None] = {}
        offsets_seen: dict[OffsetKey, CommittedOffset | None] = {}
        partition = self.broker.replicas.get(OFFSETS_TOPIC, index)
        offset = partition.log.log_start_offset
        end = partition.log.log_end_offset
        while offset < end:
            await asyncio.sleep(0)  # serve other requests between chunks
            if self.loading.get(index) != epoch:
                break
            partition = self.broker.replicas.get(OFFSETS_TOPIC, index)
            if partition is None:
                break
            try:
                read = partition.log.read(offset, self.load_buffer_bytes, max_offset=end)
            except OffsetOutOfRange:
                offset = partition.log.log_start_offset  # retention or compaction moved the start
                continue
            if not read.regions:
                break
            data = b"".join(bytes(region.read()) for region in read.regions)
            for record in iter_records(data, offset):
                _apply_record(record.key, record.value, groups_seen, offsets_seen, index)
            following = max((h.next_offset for _, h in iter_batches(data)), default=offset)
            if following <= offset:
                raise CorruptRecordError(f"no complete batch at offset {offset}")
            offset = following
        return groups_seen, offsets_seen


def _apply_record(key, value, groups_seen, offsets_seen, index) -> None:
    if key is None:
        log.warning("%s-%d: a record without a key, skipped", OFFSETS_TOPIC, index)
        return
    try:
        decoded = decode_key(bytes(key))
        if isinstance(decoded, OffsetKey):
            offsets_seen[decoded] = None if value is None else decode_offset_value(bytes(value))
        elif isinstance(decoded, GroupKey):
            groups_seen[decoded.group] = None if value is None else decode_group_value(bytes(value))
    except (DecodeError, CorruptRecordError) as exc:
        log.warning("%s-%d: a record that does not decode, skipped: %s", OFFSETS_TOPIC, index, exc)


def build_groups(
    groups_seen: dict[str, dict | None],
    offsets_seen: dict[OffsetKey, CommittedOffset | None],
    now_ms: int,
) -> list[Group]:
    """Groups as the records left them: a group with members is Stable (its members'
    sessions restart now), one without is Empty; offsets without group metadata belong
    to a group that only commits (no protocol type)."""
    groups: dict[str, Group] = {}
    for group_id, value in groups_seen.items():
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
    for key, committed in offsets_seen.items():
        if committed is None:
            continue
        group = groups.get(key.group)
        if group is None:
            group = groups[key.group] = Group(key.group)
        group.offsets[(key.topic, key.partition)] = committed
    return list(groups.values())
