"""Sending the partition leader's verification questions (KIP-890 part 1): AddPartitionsToTxn
v4 with verify_only to the coordinator of each transactional id, batched per coordinator
broker (the decisions: verification.py; docs/contracts/transactions.md, "Verification at
the partition leader").

The coordinator of an id is the leader of its `__transaction_state` partition in the
metadata cache; none known (no topic yet, no live leader) answers COORDINATOR_NOT_AVAILABLE
at once. Each request goes through the shared `PeerClients` (peers.py), the coordinator's
own broker included; its `transport` is replaceable (the in-process tests answer it
themselves and count the requests).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from broker.coordinator.coordinator import Waiter
from broker.protocol.apis import ADD_PARTITIONS_TO_TXN_API
from broker.protocol.errors import ErrorCode, UnsupportedVersionError
from broker.transactions.peers import PeerClients
from broker.transactions.state import TopicPartition
from broker.transactions.state_topic import TRANSACTION_STATE_TOPIC, partition_for
from broker.transactions.verification import (
    SKIP,
    VERIFY_VERSION,
    Calls,
    Sent,
    VerificationQueue,
    request_version,
)

log = logging.getLogger(__name__)

REQUEST_TIMEOUT_S = 30.0  # Kafka's inter-broker request.timeout.ms

# (broker id, request body) -> response body; raises when no answer came.
Transport = Callable[[int, dict], Awaitable[dict]]


class PartitionVerifier:
    def __init__(
        self, ctx, state_partitions: int, peers: PeerClients, transport: Transport | None = None
    ) -> None:
        self.ctx = ctx
        self.state_partitions = state_partitions
        self.peers = peers
        self.transport = transport or self._over_network
        self.queue = VerificationQueue()
        self.requests_sent = 0  # AddPartitionsToTxn requests (tests look)
        # (partition, producer id) -> Produces waiting for verification that carry a
        # batch of that producer to that partition (verification.plan).
        self.held: dict[tuple[TopicPartition, int], int] = {}

    def holds(self, tp: TopicPartition, producer_id: int) -> bool:
        return (tp, producer_id) in self.held

    def hold(self, producer_id: int, partitions) -> None:
        for tp in partitions:
            key = (tp, producer_id)
            self.held[key] = self.held.get(key, 0) + 1

    def release(self, producer_id: int, partitions) -> None:
        for tp in partitions:
            key = (tp, producer_id)
            if self.held.get(key, 0) <= 1:
                self.held.pop(key, None)
            else:
                self.held[key] -= 1

    def verify(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: frozenset[TopicPartition],
        add: bool = False,
    ) -> Waiter:
        """An operation completing with the partitions NOT verified and their codes
        (verification.Errors; empty: all verified). `add`: a transaction version 2
        Produce, the coordinator adds the partitions instead of only checking them."""
        waiter = Waiter()
        broker = self.coordinator_of(transactional_id)
        if broker is None:
            waiter.complete(dict.fromkeys(partitions, ErrorCode.COORDINATOR_NOT_AVAILABLE))
            return waiter
        failed = self.queue.add(
            broker, transactional_id, producer_id, producer_epoch, partitions, waiter.complete, add
        )
        self._call(failed)
        self._send_ready()
        return waiter

    def coordinator_of(self, transactional_id: str) -> int | None:
        metadata = self.ctx.metadata
        index = partition_for(transactional_id, self.state_partitions)
        state = metadata.partition(TRANSACTION_STATE_TOPIC, index)
        if state is None or not metadata.is_online(state) or state.leader not in metadata.brokers:
            return None
        return state.leader

    def _send_ready(self) -> None:
        for broker, body, sent in self.queue.take():
            self.requests_sent += 1
            self.ctx.spawn(self._exchange(broker, body, sent))

    async def _exchange(self, broker: int, body: dict, sent: Sent) -> None:
        try:
            response = await self.transport(broker, body)
        except UnsupportedVersionError:
            if request_version(body) > VERIFY_VERSION:
                # Cannot add for a transaction version 2 producer: it retries (its
                # coordinator should not have advertised the version).
                log.warning("broker %d cannot add partitions (no AddPartitionsToTxn v5)", broker)
                response = None
            else:
                # A coordinator without v4 cannot verify: append unverified, as Kafka.
                log.warning(
                    "broker %d cannot verify transactions (no AddPartitionsToTxn v4)", broker
                )
                response = SKIP
        except Exception as exc:
            log.warning("verifying transactions at broker %d failed: %s", broker, exc)
            response = None
        try:
            calls = self.queue.answered(broker, sent, response)
        except Exception:
            log.exception("broker %d: an AddPartitionsToTxn answer was not understood", broker)
            calls = self.queue.answered(broker, sent, None)
        self._call(calls)
        self._send_ready()  # what queued up for this broker meanwhile

    @staticmethod
    def _call(calls: Calls) -> None:
        for callback, errors in calls:
            try:
                callback(errors)
            except Exception:
                log.exception("a verified produce failed")

    async def _over_network(self, broker: int, body: dict) -> dict:
        return await self.peers.request(
            broker, ADD_PARTITIONS_TO_TXN_API.key, request_version(body), body, REQUEST_TIMEOUT_S
        )
