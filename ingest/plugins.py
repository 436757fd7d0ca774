"""The load's plug points by name: which decoder reads a topic, which partitioner places
its rows, which record writer writes its files. The configuration names them
(``decoder``, ``partitioner``, ``format``, and per topic ``per.topic.decoder`` /
``per.topic.partitioner`` / ``per.topic.format``); this module is where a name becomes an
object, so adding one is one entry here (ingest/README.md, "Plug points").
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from broker.protocol.topic import topic_name_problem
from ingest.decoders import ConfluentAvroDecoder, Decoder, JsonDecoder, RawDecoder
from ingest.partitioner import (
    EventDayPartitioner,
    EventHourPartitioner,
    IngestionTimePartitioner,
    Partitioner,
)
from ingest.writers import AvroRecordWriter, ParquetRecordWriter, RecordWriter
from schemas.client import RegistryClient
from schemas.serde import topic_subject

if TYPE_CHECKING:
    from ingest.schema_pins import PinnedRegistry


@dataclass(frozen=True)
class TopicContext:
    """What a factory may build a plug-in from, for one topic of one run."""

    topic: str
    # The run's pinned view of the registry (ingest/schema_pins.py) or a plain client;
    # None where nothing is decoded (the audit).
    registry: RegistryClient | PinnedRegistry | None
    time_field: str | None  # the event-time field (time.field)
    ingest_time_ms: int  # when the range was first loaded: the run's start time


DECODERS: dict[str, Callable[[TopicContext], Decoder]] = {
    "confluent-avro": lambda ctx: ConfluentAvroDecoder(ctx.registry, ctx.topic),
    "json": lambda ctx: JsonDecoder(ctx.registry, ctx.topic),
    "raw": lambda ctx: RawDecoder(),
}
# The decoders that read a topic into its subject's latest schema (topic_subject): the
# driver pins that schema for a run's tasks (ingest/schema_pins.py).
REGISTRY_DECODERS = frozenset({"confluent-avro", "json"})

PARTITIONERS: dict[str, Callable[[TopicContext], Partitioner]] = {
    "event-hour": lambda ctx: EventHourPartitioner(ctx.time_field),
    "event-day": lambda ctx: EventDayPartitioner(ctx.time_field),
    "ingestion-time": lambda ctx: IngestionTimePartitioner(ctx.ingest_time_ms),
}

# Writer classes: ``for_decoder(file, decoder)`` builds one, ``extension`` names files.
WRITERS: dict[str, type[RecordWriter]] = {
    "parquet": ParquetRecordWriter,
    "avro": AvroRecordWriter,
}

KINDS: dict[str, Mapping[str, Any]] = {
    "decoder": DECODERS,
    "partitioner": PARTITIONERS,
    "format": WRITERS,
}


def per_topic_problem(kind: str, entries: Iterable[str]) -> str | None:
    """Why a ``per.topic.<kind>`` list is refused (entries ``topic=name``), or None."""
    seen = set()
    for entry in entries:
        topic, sep, name = entry.rpartition("=")
        if not sep:
            return f"{entry!r} is not topic={kind}"
        problem = topic_name_problem(topic)
        if problem:
            return f"{entry!r}: {problem}"
        if name not in KINDS[kind]:
            return f"{entry!r}: unknown {kind} {name!r} (known: {', '.join(KINDS[kind])})"
        if topic in seen:
            return f"{entry!r}: topic {topic} is named twice"
        seen.add(topic)
    return None


@dataclass(frozen=True)
class Choice:
    decoder: str
    partitioner: str
    format: str


@dataclass(frozen=True)
class TopicPlugins:
    """The configured choices: defaults, and (kind, topic, name) overrides. Picklable,
    so it travels to executors inside the task settings."""

    default: Choice = Choice("confluent-avro", "event-hour", "parquet")
    per_topic: tuple[tuple[str, str, str], ...] = ()

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> TopicPlugins:
        default = Choice(config["decoder"], config["partitioner"], config["format"])
        per_topic = tuple(
            (kind, *entry.rpartition("=")[::2])
            for kind in KINDS
            for entry in config[f"per.topic.{kind}"]
        )
        return cls(default, per_topic)

    def choice(self, topic: str) -> Choice:
        chosen = {kind: getattr(self.default, kind) for kind in KINDS}
        for kind, name, value in self.per_topic:
            if name == topic:
                chosen[kind] = value
        return Choice(**chosen)

    def registry_subjects(self, topics: Iterable[str]) -> list[str]:
        """The subjects the decoders of `topics` read their target schemas from."""
        return sorted(
            {topic_subject(t) for t in topics if self.choice(t).decoder in REGISTRY_DECODERS}
        )

    def decoder(self, ctx: TopicContext) -> Decoder:
        return DECODERS[self.choice(ctx.topic).decoder](ctx)

    def partitioner(self, ctx: TopicContext) -> Partitioner:
        return PARTITIONERS[self.choice(ctx.topic).partitioner](ctx)

    def writer(self, topic: str) -> type[RecordWriter]:
        return WRITERS[self.choice(topic).format]
