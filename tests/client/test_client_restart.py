"""The client rides through a broker restart: nothing lost, nothing duplicated."""

from __future__ import annotations

import time

from broker.client.admin import AdminClient, NewTopic
from broker.client.producer import Producer
from broker.client.simple_consumer import SimpleConsumer
from tests.helpers.cluster import producing

TOPIC = "restart"
PARTITIONS = 3
RECORDS = 3000


def read_partition(consumer: SimpleConsumer, partition: int) -> list[bytes]:
    values, offset = [], 0
    while offset < consumer.latest_offset(TOPIC, partition):
        result = consumer.fetch(TOPIC, partition, offset)
        values += [r.value for r in result.records()]
        offset = result.next_offset
    return values


def test_idempotent_producer_across_a_broker_restart(broker_factory):
    b = broker_factory()
    with AdminClient(b.bootstrap) as admin:
        admin.create_topics([NewTopic(TOPIC, PARTITIONS)], raise_errors=True)
    consumer = SimpleConsumer(b.bootstrap, timeout_s=30)
    assert consumer.latest_offset(TOPIC, 0) == 0  # connected before the restart

    producer = Producer(b.bootstrap, linger_ms=2, batch_size=4096)
    with producing(producer, TOPIC, RECORDS) as (futures, third):
        assert third.wait(30)
        acknowledged_before = sum(f.done() for f in list(futures))
        b.stop()
        time.sleep(0.5)
        b.start()
    producer.flush(timeout=60)
    metas = [f.result(timeout=1) for f in futures]
    producer.close()
    assert 0 < acknowledged_before < RECORDS  # the restart really was in the middle

    stored = {p: read_partition(consumer, p) for p in range(PARTITIONS)}
    consumer.close()
    all_values = [v for values in stored.values() for v in values]
    assert len(all_values) == RECORDS, "records were lost or duplicated"
    assert set(all_values) == {b"%07d" % i for i in range(RECORDS)}
    for p, values in stored.items():
        assert values == sorted(values), f"partition {p} is out of order"
    # The offsets the producer reported are where the records are.
    for i, meta in enumerate(metas):
        assert stored[meta.partition][meta.offset] == b"%07d" % i
