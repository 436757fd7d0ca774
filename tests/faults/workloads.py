"""Workloads: clients doing something checkable against a cluster while a nemesis runs,
recording every operation in a `History`, then a final read for the checkers.

- `Producer`: an idempotent acks=all confluent-kafka producer of numbered values over the
  topic's partitions; the final read is every partition from its start to its end.
- `Group`: members of one consumer group (our client library's GroupConsumer, which
  names its generation) consuming and committing after every poll, while a producer keeps
  the topic growing; the final read is the group's committed offsets.
- `Registry`: client threads registering new schemas through any of several registry
  instances (one elected leader); the final read is every instance's view.
"""

from __future__ import annotations

import itertools
import json
import random
import re
import threading
import time

import httpx
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka import Producer as ConfluentProducer

from tests.faults.history import History
from tests.helpers.cluster import wait_for

SEND, ASSIGN, COMMIT, REGISTER = "send", "assign", "commit", "register"

# librdkafka's delivery errors after which the write may still have happened.
_INDEFINITE = {KafkaError._MSG_TIMED_OUT, KafkaError._TIMED_OUT, KafkaError.REQUEST_TIMED_OUT}


class Producer:
    """Numbered values, one producer, `rate` a second over `partitions` partitions."""

    def __init__(self, bootstrap, topic, partitions, history: History, rate=300.0) -> None:
        self.bootstrap, self.topic, self.partitions = bootstrap, topic, partitions
        self.history, self.rate = history, rate
        self.process = "producer"
        self.producer = ConfluentProducer(
            {
                "bootstrap.servers": bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 5,
                "message.timeout.ms": 60000,
                "request.timeout.ms": 5000,
            }
        )
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="fault-producer", daemon=True)

    def start(self) -> Producer:
        self._thread.start()
        return self

    def _delivered(self, number, err, msg) -> None:
        if err is None:
            self.history.ok(SEND, self.process, (number, msg.partition(), msg.offset()))
        elif err.code() in _INDEFINITE:
            self.history.info(SEND, self.process, (number, err.name()))
        else:
            self.history.fail(SEND, self.process, (number, err.name()))

    def _run(self) -> None:
        started = time.monotonic()
        for number in itertools.count():
            while number > self.rate * (time.monotonic() - started):
                if self._stop.is_set():
                    return
                self.producer.poll(0.005)
            if self._stop.is_set():
                return
            self.history.invoke(SEND, self.process, number)
            while True:
                try:
                    self.producer.produce(
                        self.topic,
                        value=b"%08d" % number,
                        partition=number % self.partitions,
                        on_delivery=lambda err, msg, n=number: self._delivered(n, err, msg),
                    )
                    break
                except BufferError:
                    self.producer.poll(0.05)
            self.producer.poll(0)

    def stop(self, flush_s: float = 90.0) -> None:
        self._stop.set()
        self._thread.join()
        left = self.producer.flush(flush_s)
        if left:
            self.history.info("flush", self.process, f"{left} sends never completed")

    def final_read(self) -> dict[int, list[tuple[int, int]]]:
        return read_numbers(self.bootstrap, self.topic, self.partitions)


def read_numbers(bootstrap, topic, partitions, timeout_s=60.0) -> dict[int, list[tuple[int, int]]]:
    """Every partition from its start to its high watermark: partition -> [(offset, n)]."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "fault-reader",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    try:
        ends = {}
        deadline = time.monotonic() + timeout_s
        for p in range(partitions):
            while True:  # a new client's metadata may still lack the topic: ask again
                try:
                    ends[p] = consumer.get_watermark_offsets(TopicPartition(topic, p), 10)[1]
                    break
                except KafkaException:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.5)
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        read: dict[int, list[tuple[int, int]]] = {p: [] for p in range(partitions)}
        done = {p for p, end in ends.items() if end == 0}
        deadline = time.monotonic() + timeout_s
        while len(done) < partitions and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    if msg.offset() >= ends[msg.partition()]:
                        done.add(msg.partition())
                    continue
                raise AssertionError(f"final read: {msg.error()}")
            read[msg.partition()].append((msg.offset(), int(msg.value())))
            if msg.offset() + 1 >= ends[msg.partition()]:
                done.add(msg.partition())
        if len(done) < partitions:
            raise AssertionError(f"final read: partitions {set(ends) - done} not read to the end")
        return read
    finally:
        consumer.close()


class Group:
    """`members` consumers of group `group` on `topic`, committing after each poll, plus a
    producer (`Producer`) keeping the topic growing."""

    SESSION_MS = 6000

    def __init__(self, bootstrap, topic, partitions, group, history: History, members=3):
        self.bootstrap, self.topic, self.partitions, self.group = (
            bootstrap,
            topic,
            partitions,
            group,
        )
        self.history = history
        self.feed = Producer(bootstrap, topic, partitions, History(), rate=200.0)
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._member, args=(f"member-{i}",), daemon=True)
            for i in range(members)
        ]
        self.errors: list[str] = []

    def start(self) -> Group:
        self.feed.start()
        for t in self._threads:
            t.start()
        return self

    def _member(self, name: str) -> None:
        from broker.client.group.consumer import GroupConsumer
        from broker.client.group.subscription import RebalanceListener

        history, workload = self.history, self

        class Listener(RebalanceListener):
            def on_partitions_assigned(self, partitions):
                generation = consumer.group_metadata().generation_id
                owned = sorted(tp.partition for tp in consumer.assignment())
                history.ok(ASSIGN, name, (generation, name, owned))

            def on_partitions_revoked(self, partitions):
                history.ok("revoke", name, sorted(tp.partition for tp in partitions))

        while not self._stop.is_set():
            try:
                consumer = GroupConsumer(
                    self.bootstrap,
                    group_id=self.group,
                    client_id=name,
                    enable_auto_commit=False,
                    auto_offset_reset="earliest",
                    session_timeout_ms=self.SESSION_MS,
                    heartbeat_interval_ms=1000,
                    request_timeout_ms=5000,
                )
            except Exception as exc:  # noqa: BLE001 - no broker reachable now: again
                self.history.info("open", name, repr(exc))
                self._stop.wait(1.0)
                continue
            try:
                consumer.subscribe([self.topic], listener=Listener())
                while not workload._stop.is_set():
                    records = consumer.poll(0.2)
                    if not records:
                        continue
                    offsets: dict[int, int] = {}
                    for r in records:
                        offsets[r.partition] = max(offsets.get(r.partition, 0), r.offset + 1)
                    generation = consumer.group_metadata().generation_id
                    history.invoke(COMMIT, name, (name, generation, offsets))
                    try:
                        consumer.commit({(self.topic, p): o for p, o in offsets.items()})
                        history.ok(COMMIT, name, (name, generation, offsets))
                    except Exception as exc:  # noqa: BLE001 - refused or unknown: recorded
                        history.info(COMMIT, name, (name, generation, repr(exc)[:200]))
            except Exception as exc:  # noqa: BLE001 - the member starts over, as a restart
                self.history.info("member", name, repr(exc)[:200])
                self._stop.wait(0.5)
            finally:
                try:
                    consumer.close()
                except Exception:  # noqa: BLE001, S110
                    pass

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(60)
        self.feed.stop()

    def final_commits(self) -> dict[int, int]:
        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": self.group})
        try:
            parts = consumer.committed(
                [TopicPartition(self.topic, p) for p in range(self.partitions)], timeout=30
            )
            return {tp.partition: tp.offset for tp in parts if tp.offset >= 0}
        finally:
            consumer.close()


# -- the schema registry -------------------------------------------------------------------


def schema_text(name: str) -> str:
    return json.dumps({"type": "record", "name": name, "fields": [{"name": "n", "type": "long"}]})


def registry_leader(instances) -> int:
    """The index of the instance every running one last named leader (their logs)."""

    def agreed():
        named = set()
        for r in instances:
            if r.proc is None:
                continue
            found = re.findall(r"leader: (\S+)", r.log_text())
            named.add(found[-1] if found else None)
        if len(named) == 1 and None not in named and "None" not in named:
            url = named.pop()
            return next((i for i, r in enumerate(instances) if r.url == url), None)
        return None

    found = wait_for(lambda: (i := agreed()) is not None and (i,), "an agreed registry leader")
    return found[0]


class Registry:
    """`clients` threads, each registering new schemas (distinct record names) under
    subjects `fault-0..2` through a random running instance; ok values are (subject,
    name, id)."""

    def __init__(self, instances, history: History, rng: random.Random, clients=3) -> None:
        self.instances, self.history = instances, history
        self.rng = random.Random(rng.random())
        self._stop = threading.Event()
        self._counter = itertools.count()
        self._threads = [
            threading.Thread(target=self._client, args=(f"client-{i}",), daemon=True)
            for i in range(clients)
        ]

    def start(self) -> Registry:
        for instance in self.instances:
            if instance.proc is not None:
                httpx.put(f"{instance.url}/config", json={"compatibility": "NONE"}, timeout=30)
                break
        for t in self._threads:
            t.start()
        return self

    def _client(self, name: str) -> None:
        with httpx.Client(timeout=8.0) as http:
            while not self._stop.is_set():
                n = next(self._counter)
                subject, schema = f"fault-{n % 3}", f"S{n}"
                running = [r for r in self.instances if r.proc is not None]
                instance = self.rng.choice(running)
                self.history.invoke(REGISTER, name, (subject, schema, instance.url))
                try:
                    answer = http.post(
                        f"{instance.url}/subjects/{subject}/versions",
                        json={"schema": schema_text(schema)},
                    )
                except httpx.HTTPError as exc:
                    self.history.info(REGISTER, name, (subject, schema, repr(exc)[:100]))
                    continue
                if answer.status_code == 200:
                    self.history.ok(REGISTER, name, (subject, schema, answer.json()["id"]))
                else:
                    body = answer.json() if answer.content else {}
                    code = body.get("error_code", answer.status_code)
                    # 50003: forwarded, the leader's answer lost: the write may have happened.
                    kind = self.history.info if code in (50002, 50003) else self.history.fail
                    kind(REGISTER, name, (subject, schema, code))
                    self._stop.wait(0.1)

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(30)

    def final_views(self) -> dict[str, dict[tuple[str, int], tuple[int, str]]]:
        """Every running instance's view, once they agree or 30 s have passed."""
        deadline = time.monotonic() + 30
        while True:
            views = {r.url: registry_view(r.url) for r in self.instances if r.proc is not None}
            if len({json.dumps(sorted(v.items())) for v in views.values()}) <= 1:
                return views
            if time.monotonic() > deadline:
                return views
            time.sleep(0.5)


def registry_view(url: str) -> dict[tuple[str, int], tuple[int, str]]:
    with httpx.Client(base_url=url, timeout=30) as http:
        view = {}
        for subject in http.get("/subjects?deleted=true").json():
            for v in http.get(f"/subjects/{subject}/versions?deleted=true").json():
                body = http.get(f"/subjects/{subject}/versions/{v}?deleted=true").json()
                view[(subject, v)] = (body["id"], json.loads(body["schema"])["name"])
        return view
