"""The broker's time-driven duties, as a function of the clock: flush by time, retention
and delayed deletes (`LogManager.tick`), the log dirs' checkpoints, expired producer ids,
expired committed offsets, transactions past their timeout and idle transactional ids. `Broker._duties` calls `run` about once a second.

Each duty that walks every partition runs on its own interval (Kafka's keys), never
every tick, and writes only what changed; the tick's flushes and deletions look only at
the logs that said they have some (`Log.on_due`): an idle broker with thousands of
partitions spends its ticks on almost nothing, not formatting files or fsyncing them.
"""

from __future__ import annotations

from broker.config.server import BrokerConfig
from broker.server.context import BrokerContext


class Duties:
    def __init__(self, cfg: BrokerConfig, ctx: BrokerContext, now_ms: int) -> None:
        self._cfg = cfg
        self._ctx = ctx
        self._last_checkpoint = self._last_offsets_expiry = now_ms
        self._last_producer_expiry = now_ms
        self._last_txn_abort = self._last_txn_expiry = now_ms
        # Told each time producer ids were searched for expired ones (tests count it).
        self.producer_expiry_runs = 0

    @property
    def tick_ms(self) -> int:
        """How often `run` should be called."""
        cfg = self._cfg
        return min(
            cfg["log.flush.scheduler.interval.ms"], cfg["log.retention.check.interval.ms"], 1000
        )

    def run(self, now_ms: int) -> None:
        """Do whatever is due at `now_ms`."""
        cfg, replicas = self._cfg, self._ctx.replicas
        replicas.logs.tick(now_ms)
        if now_ms - self._last_producer_expiry >= cfg["producer.id.expiration.check.interval.ms"]:
            # Dynamic (cluster-wide or per broker, as Kafka): the value in force now.
            configs = self._ctx.configs
            expiration = (configs.current if configs is not None else cfg)[
                "producer.id.expiration.ms"
            ]
            for partition in replicas.partitions.values():
                partition.producers.expire(now_ms, expiration)
            self._last_producer_expiry = now_ms
            self.producer_expiry_runs += 1
        if now_ms - self._last_checkpoint >= cfg["replica.high.watermark.checkpoint.interval.ms"]:
            replicas.logs.checkpoint(replicas.high_watermarks())
            self._last_checkpoint = now_ms
        if now_ms - self._last_offsets_expiry >= cfg["offsets.retention.check.interval.ms"]:
            self._ctx.groups.expire_offsets()
            self._last_offsets_expiry = now_ms
        transactions = self._ctx.transactions
        if transactions is not None:
            interval = cfg["transaction.abort.timed.out.transaction.cleanup.interval.ms"]
            if now_ms - self._last_txn_abort >= interval:
                transactions.abort_timed_out()
                self._last_txn_abort = now_ms
            interval = cfg["transaction.remove.expired.transaction.cleanup.interval.ms"]
            if now_ms - self._last_txn_expiry >= interval:
                transactions.expire_transactional_ids()
                self._last_txn_expiry = now_ms
