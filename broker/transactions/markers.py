"""Sending COMMIT/ABORT markers: WriteTxnMarkers to each partition's leader, retried.

The coordinator decides what to send (`SendMarkers`) and what each answer means
(`markers_answered`); this is the I/O between (docs/contracts/transactions.md, Markers):
the partitions waiting for a marker are kept per transaction; each round finds their
leaders in the metadata cache and sends one WriteTxnMarkers request per broker carrying
every transaction's markers for it (`marker_requests`), at most one request in flight per
broker (markers for a broker still answering wait for its answer, then go together). Partitions to retry (no leader
known, a leader that moved, a lost connection) wait RETRY_BACKOFF_MS for the next round,
by which time the metadata cache may name another leader. A partition of a topic that no
longer exists is done: nothing can be marked there (as Kafka).

One `NodeClient` per destination broker (peers.py, shared with the produce path's
verification), on the inter-broker listener, as the replica fetchers reach their leaders;
the coordinator's own partitions go over the network too.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import replace

from broker.protocol.apis import WRITE_TXN_MARKERS_API
from broker.protocol.errors import ErrorCode
from broker.transactions import coordinator as core
from broker.transactions.coordinator import SendMarkers
from broker.transactions.peers import PeerClients
from broker.transactions.state import TopicPartition

log = logging.getLogger(__name__)

RETRY_BACKOFF_MS = 100
REQUEST_TIMEOUT_S = 30.0

# (broker id, request body) -> response body; raises when no answer came.
Transport = Callable[[int, dict], Awaitable[dict]]


class MarkerSender:
    def __init__(self, ctx, manager, transport: Transport | None = None) -> None:
        self.ctx = ctx
        self.manager = manager
        self.transport = transport or self._over_network
        # transaction -> its partitions still waiting for a marker (sent or not)
        self.waiting: dict[SendMarkers, set[TopicPartition]] = {}
        self._due: dict[SendMarkers, set[TopicPartition]] = {}  # to send in the next round
        self._wake: asyncio.Event | None = None
        self._task = None
        self.peers = PeerClients(ctx, f"transactions-{ctx.config.broker_id}")
        self._busy: set[int] = set()  # brokers with a request in flight
        self.requests_sent = 0  # WriteTxnMarkers requests (tests look)
        self.retry_backoff_ms = RETRY_BACKOFF_MS

    # -- what the coordinator hands over --------------------------------------------------
    def add(self, send: SendMarkers) -> None:
        if not send.partitions:
            # Nothing to mark (EndTxn of a transaction that added nothing): complete now.
            self.manager.markers_answered(send, {})
            return
        self.waiting.setdefault(send, set()).update(send.partitions)
        self._due.setdefault(send, set()).update(send.partitions)
        self._kick()

    def _kick(self) -> None:
        if self._task is None:
            self._wake = asyncio.Event()
            self._task = self.ctx.spawn(self._run())
        if self._wake is not None:
            self._wake.set()

    # -- the rounds ------------------------------------------------------------------------
    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            due, self._due = self._due, {}
            if not due:
                continue
            try:
                self._round(due)
            except Exception:
                log.exception("sending transaction markers failed; retrying")
                self._retry({send: set(tps) for send, tps in due.items()})

    def _round(self, due: dict[SendMarkers, set[TopicPartition]]) -> None:
        """Send what is due: one request per leader broker that has none in flight; the
        markers for a broker still answering wait for its answer (then a new round)."""
        metadata = self.ctx.metadata
        gone: dict[SendMarkers, dict[TopicPartition, ErrorCode]] = {}
        sends = []
        for send, tps in due.items():
            if send not in self.waiting:
                continue
            if not core.markers_due(self.manager.state, send):
                log.info(
                    "markers of %s (pid %d) no longer due here: dropped",
                    send.transactional_id,
                    send.producer_id,
                )
                del self.waiting[send]  # unloaded, or a newer coordinator took over
                continue
            live = frozenset(tp for tp in tps if metadata.partition(*tp) is not None)
            if live != tps:
                gone[send] = {tp: ErrorCode.NONE for tp in tps - live}
            if live:
                sends.append((send, live))
        for send, errors in gone.items():
            self._answered(send, errors)

        def leader_of(tp: TopicPartition) -> int | None:
            state = metadata.partition(*tp)
            if state is None or not metadata.is_online(state):
                return None
            return state.leader

        # The pure core builds the bodies from SendMarkers; a round may send only some of
        # a transaction's partitions, so each is narrowed to them. A producer id is in a
        # round once: one open transaction per producer id.
        narrowed = {_narrow(send, tps): send for send, tps in sends}
        requests, no_leader = core.marker_requests(narrowed, leader_of)
        retry: dict[SendMarkers, set[TopicPartition]] = {}
        for part, tps in no_leader:
            retry.setdefault(narrowed[part], set()).update(tps)
        if retry:
            self._retry(retry)
        by_pid = {part.producer_id: send for part, send in narrowed.items()}
        for broker, body in requests.items():
            if broker in self._busy:
                for send, tps in _partitions_of(body, by_pid).items():
                    self._due.setdefault(send, set()).update(tps)
                continue
            self._busy.add(broker)
            if log.isEnabledFor(logging.DEBUG):
                log.debug("WriteTxnMarkers to broker %d: %s", broker, _describe(body))
            self.ctx.spawn(self._exchange(broker, body, by_pid))

    async def _exchange(self, broker: int, body: dict, by_pid: dict[int, SendMarkers]) -> None:
        """One WriteTxnMarkers request to `broker` and what its answer means."""
        try:
            response = await self._send(broker, body)
            retry: dict[SendMarkers, set[TopicPartition]] = {}
            if response is None:  # no answer: every partition of the request again
                retry = _partitions_of(body, by_pid)
            else:
                failed = _failures(response)
                if failed:  # retried or cancelled below; a marker late is a transaction stalled
                    log.info("WriteTxnMarkers to broker %d: %s", broker, failed)
                for marker in response["markers"]:
                    send = by_pid.get(marker["producer_id"])
                    if send is None:
                        continue
                    errors = {
                        (t["name"], p["partition_index"]): ErrorCode(p["error_code"])
                        for t in marker["topics"]
                        for p in t["partitions"]
                    }
                    progress = self._answered(send, errors)
                    if progress is not None and progress.retry:
                        retry.setdefault(send, set()).update(progress.retry)
            if retry:
                self._retry(retry)
        except Exception:
            log.exception("transaction markers to broker %d: the answer failed; retrying", broker)
            self._retry(_partitions_of(body, by_pid))
        finally:
            self._busy.discard(broker)
            if self._due:
                self._wake.set()  # markers held back for this broker go now

    def _answered(self, send: SendMarkers, errors) -> core.MarkerProgress | None:
        if send not in self.waiting:
            return None
        try:
            progress = self.manager.markers_answered(send, errors)
        except Exception:
            log.exception("transactional id %s: a marker answer was not understood", send)
            progress = core.MarkerProgress(cancelled=True)
        if progress.cancelled:
            log.info(
                "markers of %s (pid %d) cancelled after answers %s",
                send.transactional_id,
                send.producer_id,
                {tp: e.name for tp, e in errors.items()},
            )
        left = self.waiting[send]
        left.difference_update(tp for tp, e in errors.items() if tp not in progress.retry)
        if progress.cancelled or progress.write is not None or not left:
            del self.waiting[send]
        return progress

    def _retry(self, retry: dict[SendMarkers, set[TopicPartition]]) -> None:
        async def later() -> None:
            await asyncio.sleep(self.retry_backoff_ms / 1000)
            for send, tps in retry.items():
                if send in self.waiting:
                    self._due.setdefault(send, set()).update(tps & self.waiting[send])
            self._wake.set()

        self.ctx.spawn(later())

    async def _send(self, broker: int, body: dict) -> dict | None:
        self.requests_sent += 1
        try:
            return await self.transport(broker, body)
        except Exception as exc:
            log.warning("WriteTxnMarkers to broker %d failed: %s; retrying", broker, exc)
            return None

    async def _over_network(self, broker: int, body: dict) -> dict:
        return await self.peers.request(
            broker,
            WRITE_TXN_MARKERS_API.key,
            WRITE_TXN_MARKERS_API.max_version,
            body,
            REQUEST_TIMEOUT_S,
        )

    def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
        self.peers.close()


def _partitions_of(body: dict, by_pid: dict[int, SendMarkers]) -> dict:
    """The partitions a WriteTxnMarkers request body carries, per transaction."""
    found: dict[SendMarkers, set[TopicPartition]] = {}
    for marker in body["markers"]:
        send = by_pid[marker["producer_id"]]
        for t in marker["topics"]:
            found.setdefault(send, set()).update((t["name"], p) for p in t["partition_indexes"])
    return found


def _describe(body: dict) -> str:
    """The markers of a request, for the log: producer id, result and partitions."""
    return "; ".join(
        f"pid {m['producer_id']} {'COMMIT' if m['transaction_result'] else 'ABORT'} "
        f"epoch {m['producer_epoch']} coordinator epoch {m['coordinator_epoch']} "
        + ",".join(f"{t['name']}-{p}" for t in m["topics"] for p in t["partition_indexes"])
        for m in body["markers"]
    )


def _failures(response: dict) -> str:
    """The partitions of an answer that were not NONE, for the log ("" when none)."""
    failed = [
        f"pid {m['producer_id']} {t['name']}-{p['partition_index']} "
        f"{ErrorCode(p['error_code']).name}"
        for m in response["markers"]
        for t in m["topics"]
        for p in t["partitions"]
        if p["error_code"] != ErrorCode.NONE
    ]
    return "; ".join(failed)


def _narrow(send: SendMarkers, partitions: frozenset[TopicPartition]) -> SendMarkers:
    return replace(send, partitions=partitions)
