"""A consume-transform-produce application, run as a process by tests/transactions/
test_eos_*.py: copies every record of an input topic to an output topic exactly once with
confluent-kafka (a read_committed consumer without auto commit, a transactional producer,
the consumer's offsets committed in the producer's transaction with its group metadata).

    python -m tests.transactions.eos_copier BOOTSTRAP INPUT OUTPUT GROUP TXN_ID TOTAL [HOLD_AT]

It prints one line per step to stdout, flushed at once, for the test to follow:
`open N` (records of the current transaction flushed, not committed yet: a kill now
leaves a transaction for the next producer of the id to abort), `committed N` (the
offsets consumed so far, committed) and `done` when its positions reach TOTAL; then it
exits 0. With HOLD_AT, the first transaction after HOLD_AT records were committed holds
its flushed records uncommitted for a minute (after its `open` line), so a test can kill
it with a transaction surely open. Abortable errors are handled as confluent-kafka documents: abort, rewind the
consumer to the committed offsets, go on.
"""

from __future__ import annotations

import sys
import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer

BATCH = 20
PAUSE_S = 0.05  # between flushing a transaction's records and committing it
HOLD_S = 60.0


def _say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def _rewind(consumer: Consumer) -> None:
    """Back to the committed offsets: what the aborted transaction consumed comes again."""
    for tp in consumer.committed(consumer.assignment(), timeout=60):
        tp.offset = tp.offset if tp.offset >= 0 else OFFSET_BEGINNING
        consumer.seek(tp)


def main(
    bootstrap: str, source: str, target: str, group: str, txn_id: str, total: int, hold_at: int
) -> int:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            # A restarted copier takes its place back at once (KIP-345).
            "group.instance.id": f"{txn_id}-member",
            # Longer than a coordinator failover (the brokers' ZooKeeper session of 6 s,
            # then an election and the group's load): librdkafka, its session timed out,
            # heartbeats a static member with an empty member id before it rejoins, and the
            # new coordinator fences that (FENCED_INSTANCE_ID, as Kafka's does): fatal.
            "session.timeout.ms": 30000,
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": txn_id,
            "transaction.timeout.ms": 30000,
            "linger.ms": 5,
        }
    )
    producer.init_transactions(60)  # fences a killed predecessor, aborting its transaction
    consumer.subscribe([source])
    done = 0
    while True:
        messages = []
        for m in consumer.consume(BATCH, timeout=0.5):
            if m.error() is None:
                messages.append(m)
            elif m.error().fatal():  # the consumer is done for: exit, do not spin
                raise KafkaException(m.error())
        if not messages:
            continue
        producer.begin_transaction()
        try:
            for m in messages:
                producer.produce(target, m.value(), key=m.key(), partition=m.partition())
            producer.flush(60)
            _say(f"open {len(messages)}")
            time.sleep(HOLD_S if 0 <= hold_at <= done else PAUSE_S)
            positions = consumer.position(consumer.assignment())
            producer.send_offsets_to_transaction(positions, consumer.consumer_group_metadata(), 60)
            while True:
                try:
                    producer.commit_transaction(60)
                    break
                except KafkaException as exc:
                    if not exc.args[0].retriable():
                        raise
        except KafkaException as exc:
            error = exc.args[0]
            if not error.txn_requires_abort():
                raise
            _say(f"abort {error}")
            producer.abort_transaction(60)
            _rewind(consumer)
            continue
        done = sum(tp.offset for tp in positions if tp.offset >= 0)
        _say(f"committed {done}")
        if done >= total:
            _say("done")
            consumer.close()
            return 0


if __name__ == "__main__":
    bootstrap, source, target, group, txn_id, total = sys.argv[1:7]
    hold_at = int(sys.argv[7]) if len(sys.argv) > 7 else -1
    sys.exit(main(bootstrap, source, target, group, txn_id, int(total), hold_at))
