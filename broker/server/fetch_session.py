"""Fetch sessions (KIP-227), the leader's side: what each fetcher already has, so an
incremental fetch names only what changed and its answer carries only what is new.

A fetch says where it stands with (session_id, session_epoch):

- epoch 0: a full fetch that opens a new session (any session it names is closed); the
  answer carries every partition and the new session's id, or id 0 when the cache has no
  slot for it (the fetcher carries on without a session);
- epoch -1: a full fetch without a session (closing the one it names, if any);
- epoch N > 0: an incremental fetch on session `session_id`, whose next expected epoch must
  be N (FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH otherwise). Its partitions
  are the ones added or whose fetch state changed; `forgotten_topics_data` the ones to
  drop; the others are fetched as the session last knew them. Epochs wrap from 2^31-1 to 1.

The work of an incremental fetch is bounded by what changed, not by the session's size:
each session keeps the set of its partitions that may have news (`news`), filled by the
partitions a request names and by `partition_changed`, which the broker calls at the one
place it learns that a partition grew, its high watermark moved or its leadership changed
(BrokerContext.partition_changed). Only those are read; the answer carries those with
records, an error, or a high watermark / last stable offset / log start offset the fetcher
was not yet told. A partition with data beyond the fetch offset the session holds stays in
`news` after an answer (not all of it was taken yet); the others leave it.

`news` is kept in order, and an incremental fetch reads it in that order, so the size
limits (`max_bytes`, docs/contracts/fetch.md) fill the answer from its front. As Kafka
does with a session's partitions, one that returned records goes to the back: a partition
left out because the answer was full keeps its place and moves up, so it comes first
(and then gets at least its first batch) within as many fetches as there are partitions
ahead of it; none starves.

Kafka's cache limits apply (`max.incremental.fetch.session.cache.slots`,
`min.incremental.fetch.session.eviction.ms`): a full cache admits a new session only by
evicting one that has been unused for the eviction time, or else the least valuable one it
may displace (a follower's session, "privileged", is worth more than a consumer's, a larger
one more than a smaller): a follower's new session may displace consumers' sessions and
sessions older than the eviction time, a consumer's only the latter.

Nothing here does I/O; the fetch handler (broker/server/handlers/fetch.py) reads the logs.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import NamedTuple

from broker.cluster import TopicPartition
from broker.protocol.errors import ErrorCode

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
NO_SESSION = 0
_MAX_EPOCH = 0x7FFFFFFF


def next_epoch(epoch: int) -> int:
    return 1 if epoch >= _MAX_EPOCH else epoch + 1


@dataclass(frozen=True)
class SessionKey:
    """The purgatory key a session's parked fetch waits on (never a (topic, partition))."""

    session_id: int


class ReplicaKey(NamedTuple):
    """The purgatory key a follower's sessionless parked fetch waits on for one partition:
    apart from the consumers' (topic, partition) key, because an append that does not move
    the high watermark has news for followers only (BrokerContext.partition_grew). A tuple
    (made at every append, so cheaply) of one tuple: never equal to another key kind."""

    tp: TopicPartition


@dataclass(eq=False)
class FetchSession:
    id: int
    privileged: bool
    created_ms: int
    last_used_ms: int
    # Per partition, its request entry as last named (fetch_offset, partition_max_bytes,
    # current_leader_epoch, ...): what an incremental fetch fetches it with.
    partitions: dict[TopicPartition, dict] = field(default_factory=dict)
    # Per partition, (high watermark, last stable offset, log start offset) last answered.
    told: dict[TopicPartition, tuple[int, int, int]] = field(default_factory=dict)
    # Partitions that may have something to answer, in the order the next incremental
    # fetch reads them (a dict as an ordered set: the values are None).
    news: dict[TopicPartition, None] = field(default_factory=dict)
    # Partitions changed since a parked fetch of this session last looked (drained by it).
    fresh: set[TopicPartition] = field(default_factory=set)
    epoch: int = 1  # the epoch the next incremental fetch must carry
    # The purgatory key of its parked fetch: made once, read at every append it holds.
    key: SessionKey = field(init=False)

    def __post_init__(self) -> None:
        self.key = SessionKey(self.id)

    def worth(self) -> tuple[bool, int]:
        """Eviction preference: the smallest is evicted first."""
        return (self.privileged, len(self.partitions))

    def settle(
        self, tp: TopicPartition, told: tuple[int, int, int], more: bool, sent: bool = False
    ) -> None:
        """`tp` was answered with `told`; `more`: data beyond its fetch offset remains;
        `sent`: the answer carried records of it (then it goes to the back of `news`)."""
        if tp not in self.partitions:
            return
        self.told[tp] = told
        if not more:
            self.news.pop(tp, None)
        elif sent:
            self.news.pop(tp, None)
            self.news[tp] = None


@dataclass
class SessionFetch:
    """What a fetch reads: `partitions` in answer order; `full`: answer them all (else
    only those with news); `session`: the session the answer names (None: id 0)."""

    partitions: list[tuple[TopicPartition, dict]]
    full: bool
    session: FetchSession | None = None
    error: ErrorCode = ErrorCode.NONE

    @property
    def session_id(self) -> int:
        return self.session.id if self.session is not None else NO_SESSION


def requested(body: dict) -> list[tuple[TopicPartition, dict]]:
    return [((t["topic"], p["partition"]), p) for t in body["topics"] for p in t["partitions"]]


def forgotten(body: dict) -> list[TopicPartition]:
    return [
        (t["topic"], index)
        for t in body.get("forgotten_topics_data") or ()
        for index in t["partitions"]
    ]


class FetchSessionCache:
    def __init__(
        self,
        max_slots: int = 1000,
        min_eviction_ms: int = 120_000,
        new_id: Callable[[], int] | None = None,
    ) -> None:
        self.max_slots = max_slots
        self.min_eviction_ms = min_eviction_ms
        self._new_id = new_id or (lambda: random.randint(1, _MAX_EPOCH))
        self.sessions: dict[int, FetchSession] = {}
        # Per partition, the sessions holding it: whom partition_changed tells.
        self._holders: dict[TopicPartition, set[FetchSession]] = {}
        self.partitions_cached = 0
        self.evictions = 0

    # -- requests -------------------------------------------------------------------------
    def new_fetch(self, body: dict, privileged: bool, now_ms: int) -> SessionFetch:
        """Where a Fetch request stands; creates, updates or closes its session."""
        session_id = body.get("session_id", NO_SESSION)
        epoch = body.get("session_epoch", FINAL_EPOCH)
        if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            if session_id != NO_SESSION:
                self.close(session_id)
            named = requested(body)
            session = None
            if epoch == INITIAL_EPOCH and named:
                session = self._create(named, privileged, now_ms)
            return SessionFetch(named, full=True, session=session)
        session = self.sessions.get(session_id)
        if session is None:
            return SessionFetch([], full=True, error=ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
        if epoch != session.epoch:
            return SessionFetch([], full=True, error=ErrorCode.INVALID_FETCH_SESSION_EPOCH)
        session.epoch = next_epoch(epoch)
        session.last_used_ms = now_ms
        session.fresh.clear()  # this fetch reads every partition with news itself
        for tp in forgotten(body):
            self._drop(session, tp)
        for tp, preq in requested(body):
            self._hold(session, tp, preq)
        return SessionFetch(
            [(tp, session.partitions[tp]) for tp in session.news], full=False, session=session
        )

    def close(self, session_id: int) -> None:
        session = self.sessions.pop(session_id, None)
        if session is not None:
            for tp in list(session.partitions):
                self._drop(session, tp)

    # -- events ---------------------------------------------------------------------------
    def partition_changed(self, tp: TopicPartition) -> Iterable[FetchSession]:
        """`tp`'s high watermark or leadership moved: every session holding it has news.
        Returns those sessions (their parked fetches should look)."""
        holders = self._holders.get(tp, ())
        for session in holders:
            session.news.setdefault(tp)  # one already waiting keeps its place
            session.fresh.add(tp)
        return holders

    def partition_grew(self, tp: TopicPartition) -> list[FetchSession]:
        """`tp` was appended to, its high watermark unmoved: only followers' sessions have
        news (a consumer reads below the high watermark). Returns those sessions."""
        told = []
        for session in self._holders.get(tp, ()):
            if session.privileged:
                session.news.setdefault(tp)
                session.fresh.add(tp)
                told.append(session)
        return told

    # -- inside -------------------------------------------------------------------------
    def _create(
        self, named: list[tuple[TopicPartition, dict]], privileged: bool, now_ms: int
    ) -> FetchSession | None:
        if len(self.sessions) >= self.max_slots and not self._evict_for(
            (privileged, len(named)), now_ms
        ):
            return None
        session_id = self._new_id()
        while session_id == NO_SESSION or session_id in self.sessions:
            session_id = self._new_id()
        session = FetchSession(session_id, privileged, now_ms, now_ms)
        self.sessions[session_id] = session
        for tp, preq in named:
            self._hold(session, tp, preq)
        return session

    def _evict_for(self, worth: tuple[bool, int], now_ms: int) -> bool:
        # Sessions here are few (the slots): a scan at creation time, never per fetch.
        stale = [
            s for s in self.sessions.values() if now_ms - s.last_used_ms > self.min_eviction_ms
        ]
        if stale:
            victim = min(stale, key=lambda s: s.last_used_ms)
        else:
            privileged = worth[0]
            eligible = [
                s
                for s in self.sessions.values()
                if now_ms - s.created_ms > self.min_eviction_ms or (privileged and not s.privileged)
            ]
            if not eligible:
                return False
            victim = min(eligible, key=lambda s: (s.worth(), s.id))
            if worth < victim.worth():
                return False
        self.close(victim.id)
        self.evictions += 1
        return True

    def _hold(self, session: FetchSession, tp: TopicPartition, preq: dict) -> None:
        if tp not in session.partitions:
            self._holders.setdefault(tp, set()).add(session)
            self.partitions_cached += 1
        session.partitions[tp] = preq
        session.news.setdefault(tp)

    def _drop(self, session: FetchSession, tp: TopicPartition) -> None:
        if session.partitions.pop(tp, None) is None:
            return
        self.partitions_cached -= 1
        session.told.pop(tp, None)
        session.news.pop(tp, None)
        session.fresh.discard(tp)
        holders = self._holders.get(tp)
        if holders is not None:
            holders.discard(session)
            if not holders:
                del self._holders[tp]
