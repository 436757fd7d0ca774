"""Choosing the decoder, partitioner and writer per topic from the configuration."""

from __future__ import annotations

import pytest

from broker.config.definition import ConfigError
from broker.processes import ROOT
from ingest.config import load_config
from ingest.decoders import RawDecoder
from ingest.partitioner import EventDayPartitioner, EventHourPartitioner, IngestionTimePartitioner
from ingest.plugins import Choice, TopicContext, TopicPlugins
from ingest.writers import AvroRecordWriter, ParquetRecordWriter

CONF = ROOT / "conf" / "ingest.yaml"


def test_defaults_and_per_topic_choices():
    config = load_config(
        CONF,
        [
            "partitioner=event-day",
            "per.topic.decoder=app-logs=raw,clicks.json=json",
            "per.topic.partitioner=app-logs=ingestion-time",
            "per.topic.format=clicks.json=avro",
        ],
    )
    plugins = TopicPlugins.from_config(config)
    assert plugins.choice("page-views") == Choice("confluent-avro", "event-day", "parquet")
    assert plugins.choice("app-logs") == Choice("raw", "ingestion-time", "parquet")
    assert plugins.choice("clicks.json") == Choice("json", "event-day", "avro")
    context = TopicContext("app-logs", None, "header.time", 1_790_000_000_000)
    assert isinstance(plugins.decoder(context), RawDecoder)
    assert isinstance(plugins.partitioner(context), IngestionTimePartitioner)
    assert plugins.writer("app-logs") is ParquetRecordWriter
    assert plugins.writer("clicks.json") is AvroRecordWriter
    assert AvroRecordWriter.extension == "avro" and ParquetRecordWriter.extension == "parquet"
    other = TopicContext("page-views", None, "header.time", 0)
    assert isinstance(plugins.partitioner(other), EventDayPartitioner)


def test_the_shipped_config_keeps_the_hourly_avro_load():
    plugins = TopicPlugins.from_config(load_config(CONF))
    assert plugins.choice("anything") == Choice("confluent-avro", "event-hour", "parquet")
    context = TopicContext("anything", None, "header.time", 0)
    assert type(plugins.partitioner(context)) is EventHourPartitioner


@pytest.mark.parametrize(
    "override, named",
    [
        ("decoder=protobuf", "'protobuf' for configuration decoder"),
        ("partitioner=hourly", "'hourly' for configuration partitioner"),
        ("format=orc", "'orc' for configuration format"),
        ("per.topic.decoder=app-logs=xml", "configuration per.topic.decoder: 'app-logs=xml'"),
        ("per.topic.format=app-logs", "configuration per.topic.format: 'app-logs' is not"),
        ("per.topic.partitioner=bad topic=event-day", "'bad topic=event-day'"),
        ("per.topic.decoder=a=raw,a=json", "topic a is named twice"),
    ],
)
def test_bad_choices_are_refused_naming_key_and_value(override, named):
    with pytest.raises(ConfigError) as refused:
        load_config(CONF, [override])
    assert named in str(refused.value)
