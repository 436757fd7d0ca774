"""Workloads: clients doing something checkable against a cluster while a nemesis runs,
recording every operation in a `History`, then a final read for the checkers.

- `Producer`: an idempotent acks=all confluent-kafka producer of numbered values over the
  topic's partitions; the final read is every partition from its start to its end.
- `Group`: members of one consumer group (our client library's GroupConsumer, which
  names its generation) consuming and committing after every poll, while a producer keeps
  the topic growing; the final read is the group's committed offsets.
- `Transactional`: a producer of numbered values into one topic, a copier copying them
  into another in transactions (consume-transform-produce); the final read is the output
  topic, read_committed.
- `Registry`: client threads registering new schemas through any of several registry
  instances (one elected leader); the final read is every instance's view.
- `HourlyLoad`: the hourly Kafka->HDFS load run back to back while an audited producer
  writes numbered Avro records; the final read is every loaded row, every committed
  run's offsets and the audit's verdict.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import random
import re
import threading
import time

import httpx
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka import Producer as ConfluentProducer

from tests.faults.history import History
from tests.helpers.cluster import wait_for

SEND, ASSIGN, COMMIT, REGISTER, TXN = "send", "assign", "commit", "register", "txn"

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


def read_numbers(
    bootstrap, topic, partitions, timeout_s=60.0, parse=int
) -> dict[int, list[tuple[int, object]]]:
    """Every partition from its start to its high watermark, read_committed (what
    librdkafka reads by default, said here because the transactional checker relies on
    it): partition -> [(offset, parse(value))]."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "fault-reader",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": "read_committed",
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
        read: dict[int, list[tuple[int, object]]] = {p: [] for p in range(partitions)}
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
            read[msg.partition()].append((msg.offset(), parse(msg.value())))
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


# -- transactional consume-transform-produce -----------------------------------------------


def tagged(value: bytes) -> tuple[int, int]:
    """An output record of `Transactional`: (input number, transaction that wrote it)."""
    number, txn = value.split(b":")
    return int(number), int(txn)


class Transactional:
    """Consume-transform-produce exactly once: a `Producer` writes numbered values to
    `source` (its sends are the history's "send" ops), a copier copies them to the same
    partition of `target` in transactions (confluent-kafka: a read_committed group
    consumer without auto commit, a transactional producer committing the consumer's
    positions with `send_offsets_to_transaction`; the idea of
    tests/transactions/eos_copier.py). Each output value is "number:txn", txn the
    transaction's sequence number, so the checker can tell an aborted transaction's
    output from its retry's; every `ABORT_EVERY`th transaction is aborted on purpose. History: "txn" invoke txn, then ok / fail (aborted) / info
    (outcome unknown) with (txn, [(partition, number), ...]). A copier whose producer or
    consumer broke beyond an abort starts over: a new producer of the same
    transactional id fences the old one and aborts what it left open; the new consumer
    resumes from the committed offsets."""

    BATCH = 50
    # Every this many transactions one is aborted on purpose after its records reached the
    # log, so each run has aborted output for read_committed to hide.
    ABORT_EVERY = 10

    def __init__(self, bootstrap, source, target, partitions, group, txn_id, history,
                 rate=150.0):  # fmt: skip
        self.bootstrap, self.source, self.target = bootstrap, source, target
        self.partitions, self.group, self.txn_id = partitions, group, txn_id
        self.history = history
        self.feed = Producer(bootstrap, source, partitions, history, rate)
        self.committed: dict[int, int] = {}  # the positions of the last committed txn
        self._txns = itertools.count()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._copier, name="fault-copier", daemon=True)

    def start(self) -> Transactional:
        self.feed.start()
        self._thread.start()
        return self

    def _clients(self):
        consumer = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": self.group,
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "session.timeout.ms": 6000,
            }
        )
        producer = ConfluentProducer(
            {
                "bootstrap.servers": self.bootstrap,
                "transactional.id": self.txn_id,
                "transaction.timeout.ms": 20000,
                "linger.ms": 5,
                "request.timeout.ms": 5000,
            }
        )
        return consumer, producer

    def _copier(self) -> None:
        while not self._stop.is_set():
            consumer, producer = self._clients()
            try:
                producer.init_transactions(30)
                consumer.subscribe([self.source])
                while not self._stop.is_set():
                    messages = [m for m in consumer.consume(self.BATCH, 0.3) if not m.error()]
                    if messages:
                        self._copy(consumer, producer, messages)
            except Exception as exc:  # noqa: BLE001 - a fatal error: start over, as a restart
                self.history.info("copier", "copier", repr(exc)[:200])
                self._stop.wait(0.5)
            finally:
                with contextlib.suppress(Exception):
                    consumer.close()

    def _copy(self, consumer, producer, messages) -> None:
        txn = next(self._txns)
        values = [(m.partition(), int(m.value())) for m in messages]
        self.history.invoke(TXN, "copier", txn)
        try:
            producer.begin_transaction()
            for m in messages:
                out = b"%d:%d" % (int(m.value()), txn)
                producer.produce(
                    self.target, value=out, partition=m.partition(), on_delivery=self._delivered
                )
            if txn % self.ABORT_EVERY == self.ABORT_EVERY - 1:
                producer.flush(30)
                producer.abort_transaction(30)
                self.history.fail(TXN, "copier", (txn, values, "aborted on purpose"))
                self._rewind(consumer)
                return
            positions = consumer.position(consumer.assignment())
            group = consumer.consumer_group_metadata()
            producer.send_offsets_to_transaction(positions, group, 30)
            deadline = time.monotonic() + 60
            while True:
                try:
                    producer.commit_transaction(10)
                    break
                except KafkaException as exc:  # a timed-out commit may be called again
                    if not exc.args[0].retriable() or time.monotonic() > deadline:
                        raise
        except KafkaException as exc:
            error = exc.args[0]
            if not error.txn_requires_abort():
                self.history.info(TXN, "copier", (txn, values, error.str()[:100]))
                raise
            try:
                producer.abort_transaction(30)
            except KafkaException:
                self.history.info(TXN, "copier", (txn, values, error.str()[:100]))
                raise
            self.history.fail(TXN, "copier", (txn, values, error.str()[:100]))
            self._rewind(consumer)
            return
        self.history.ok(TXN, "copier", (txn, values))
        # After a rewind (seek) a partition has no position until it is read again:
        # what was committed for it stands.
        self.committed.update({tp.partition: tp.offset for tp in positions if tp.offset >= 0})

    def _delivered(self, err, msg) -> None:
        """Why a transaction's record was not written, for reading a stalled copy."""
        if err is not None:
            self.history.info("delivery", "copier", (msg.partition(), err.name(), err.str()[:80]))

    @staticmethod
    def _rewind(consumer) -> None:
        """Back to the committed offsets: what the aborted transaction consumed comes again."""
        for tp in consumer.committed(consumer.assignment(), timeout=30):
            tp.offset = tp.offset if tp.offset >= 0 else OFFSET_BEGINNING
            consumer.seek(tp)

    def stop(self, catch_up_s: float = 90.0) -> None:
        """Stop the input, let the copier commit all of it (bounded), stop the copier."""
        self.feed.stop()
        ends = {}
        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": "fault-ends"})
        try:
            for p in range(self.partitions):
                tp = TopicPartition(self.source, p)
                ends[p] = consumer.get_watermark_offsets(tp, 30)[1]
        finally:
            consumer.close()
        caught_up = lambda: all(self.committed.get(p, 0) >= end for p, end in ends.items())  # noqa: E731
        deadline = time.monotonic() + catch_up_s
        while not caught_up() and time.monotonic() < deadline:
            time.sleep(0.2)
        if not caught_up():
            self.history.info("copier", "copier", f"not caught up: {self.committed} < {ends}")
        self._stop.set()
        self._thread.join(120)

    def final_read(self) -> dict[int, list[tuple[int, tuple[int, int]]]]:
        return read_numbers(self.bootstrap, self.target, self.partitions, parse=tagged)


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


# -- the hourly load -----------------------------------------------------------------------

LOAD, AUDIT = "load", "audit"


def hour_label(epoch_ms: int) -> str:
    """The event hour a record belongs to, as its directory spells it: "YYYY-MM-DD HH"."""
    from ingest.layout import Hour

    return " ".join(Hour.of_ms(epoch_ms))


class HourlyLoad:
    """The hourly Kafka->HDFS load (ingest/job.py `run_load`) run back to back while an
    audited producer (schemas/audited_producer.py: Avro through the registry, counts on an
    audit topic of the run's own) writes numbered ClickEvents to `topic`; each record's
    event_id is its number as a UUID, its event time a function of its number spread over
    three whole hours that ended at least an hour ago (so the audit can judge them).

    History: "send" invoke number, then ok (number, partition, offset, event hour) or info
    (the producer gave up: it may have been written); "load" invoke, then ok (run id,
    {partition: (first, next)}) or info (the load failed: nothing of it may count, the
    next one must be exact); at `stop()` the producer closes (publishing every count),
    then loads are made until one commits with every partition at its end ("final"), and
    the audit is run ("audit" ok with [(hour, complete, reasons)]).

    The Spark session is the caller's, kept across loads (and runs): each load costs
    seconds, not a new application's start."""

    SPAN_HOURS = 3

    def __init__(self, bootstrap, registry_url, topic, partitions, root, history: History,
                 spark, *, rate=100.0, tag="faults") -> None:  # fmt: skip
        from broker.processes import ROOT
        from broker.util.clock import HOUR_MS, now_ms
        from ingest.config import load_config

        self.topic, self.partitions, self.history = topic, partitions, history
        self.spark, self.rate = spark, rate
        self.audit_topic = f"_audit_{topic}"
        self.registry_url = registry_url
        self.config = load_config(
            ROOT / "conf" / "ingest.yaml",
            [
                f"bootstrap.servers={bootstrap}",
                f"registry.url={registry_url}",
                f"root={root}",
                f"topics.whitelist={topic}",
                f"audit.topic={self.audit_topic}",
                "limits.max.records.per.task=400",  # several tasks per partition
            ],
        )
        now = now_ms()
        self.base_ms = now - now % HOUR_MS - (self.SPAN_HOURS + 2) * HOUR_MS
        self.span_ms = self.SPAN_HOURS * HOUR_MS
        self.tag = tag
        self._stop_producing = threading.Event()
        self._stop_loading = threading.Event()
        self._producer_thread = threading.Thread(target=self._produce, name="hourly-producer",
                                                 daemon=True)  # fmt: skip
        self._loader_thread = threading.Thread(target=self._loads, name="hourly-loader",
                                               daemon=True)  # fmt: skip
        self.audit_report = None

    def time_of(self, number: int) -> int:
        """A record's event time: spread over the span, not in number order (7919 s apart,
        modulo the span), as late and early events mix in live traffic."""
        return self.base_ms + (number * 7_919_003) % self.span_ms

    def start(self) -> HourlyLoad:
        self._producer_thread.start()
        self._loader_thread.start()
        return self

    # -- producing -------------------------------------------------------------------------

    def _produce(self) -> None:
        import uuid

        from schemas import catalog
        from schemas.audited_producer import AuditedProducer
        from schemas.samples import click

        schema = catalog.load_str("ClickEvent")
        rng = random.Random(0)
        producer = AuditedProducer(
            self.config["bootstrap.servers"], registry=self.registry_url, service=self.tag,
            audit_topic=self.audit_topic, emit_interval_s=1.0, linger_ms=5,
            request_timeout_ms=5000,
        )  # fmt: skip
        try:
            started = time.monotonic()
            for number in itertools.count():
                while number > self.rate * (time.monotonic() - started):
                    if self._stop_producing.wait(0.005):
                        return
                if self._stop_producing.is_set():
                    return
                ts = self.time_of(number)
                event = click(rng, ts)
                event["header"]["event_id"] = str(uuid.UUID(int=number))
                event["member_id"] = number
                self.history.invoke(SEND, "producer", number)
                try:
                    future = producer.send_avro(
                        self.topic, event, schema, key=b"%d" % number,
                        partition=number % self.partitions, timestamp_ms=ts,
                    )  # fmt: skip
                except Exception as exc:  # noqa: BLE001 - refused before sending: not written
                    self.history.fail(SEND, "producer", (number, repr(exc)[:100]))
                    self._stop_producing.wait(0.2)
                    continue
                future.add_done_callback(lambda f, n=number, t=ts: self._delivered(n, t, f))
        finally:
            try:
                producer.close(90)
            except Exception as exc:  # noqa: BLE001 - counts not published: the audit says
                self.history.info("flush", "producer", repr(exc)[:200])

    def _delivered(self, number: int, ts: int, future) -> None:
        error = future.exception()
        if error is None:
            meta = future.result()
            self.history.ok(SEND, "producer", (number, meta.partition, meta.offset, hour_label(ts)))
        else:  # the producer gave up after its retries: it may have been appended
            self.history.info(SEND, "producer", (number, repr(error)[:100]))

    # -- loading ---------------------------------------------------------------------------

    def load(self, process: str = "loader") -> bool:
        """One load, recorded; True if it committed."""
        from ingest.job import run_load

        self.history.invoke(LOAD, process)
        try:
            result = run_load(self.config, spark=self.spark, show_progress=False)
        except Exception as exc:  # noqa: BLE001 - a load failing under a fault is allowed
            self.history.info(LOAD, process, repr(exc)[:300])
            return False
        ranges = {
            p.partition: (p.first, p.next)
            for p in result.manifest.partitions
            if p.topic == self.topic
        }
        self.history.ok(LOAD, process, (result.run_id, ranges))
        return True

    def _loads(self) -> None:
        while not self._stop_loading.is_set():
            if not self.load():
                self._stop_loading.wait(1.0)

    def ends(self) -> dict[int, int]:
        from broker.client.simple_consumer import SimpleConsumer

        with SimpleConsumer(self.config["bootstrap.servers"]) as consumer:
            return {p: consumer.latest_offset(self.topic, p) for p in range(self.partitions)}

    def stop(self, attempts: int = 5) -> None:
        """Stop producing (every count published), stop the loads, then load until a
        committed load reached every partition's end, and audit."""
        from ingest.audit import audit
        from ingest.job import open_root

        self._stop_producing.set()
        self._producer_thread.join(150)
        self._stop_loading.set()
        self._loader_thread.join(600)
        ends = self.ends()
        for _ in range(attempts):
            if self.load("final"):
                _, ranges = self.history.of(LOAD, "ok")[-1].value
                if all(ranges.get(p, (0, 0))[1] >= end for p, end in ends.items()):
                    break
            time.sleep(2.0)
        self.history.invoke(AUDIT, "auditor")
        try:
            report = audit(self.config, open_root(self.config))
        except Exception as exc:  # noqa: BLE001 - recorded; the checker reports no verdict
            self.history.info(AUDIT, "auditor", repr(exc)[:300])
            return
        self.audit_report = [(h.label, h.complete, list(h.reasons)) for h in report.hours]
        self.history.ok(AUDIT, "auditor", self.audit_report)

    # -- the final read --------------------------------------------------------------------

    def loaded_rows(self) -> list[tuple[int, int, int, str]]:
        """Every row under the root: (number, partition, offset, hour of its directory)."""
        import uuid
        from pathlib import Path

        import pyarrow.parquet as pq

        path = Path(self.config["root"]) / "data" / self.topic
        if not path.exists():
            return []
        table = pq.read_table(path, partitioning="hive")
        rows = []
        for header, partition, offset, dt, hr in zip(
            table.column("header").to_pylist(),
            table.column("_kafka_partition").to_pylist(),
            table.column("_kafka_offset").to_pylist(),
            table.column("dt").to_pylist(),
            table.column("hr").to_pylist(),
            strict=True,
        ):
            number = uuid.UUID(header["event_id"]).int
            rows.append((number, partition, offset, f"{dt} {int(hr):02d}"))
        return rows

    def ledgers(self) -> list[tuple[str, str, dict[int, tuple[int, int]]]]:
        """The committed runs, in commit order: (run id, kind, {partition: (first, next)})."""
        from ingest.commit import list_runs, load_manifest
        from ingest.job import open_root

        fs = open_root(self.config)
        out = []
        for run in list_runs(fs):
            m = load_manifest(fs, run)
            ranges = {p.partition: (p.first, p.next) for p in m.partitions if p.topic == self.topic}
            out.append((run, m.kind, ranges))
        return out
