"""Decoders: fetched Kafka records of one partition -> Arrow batches + quarantine.

``Decoder`` (base.py) is the plug point; the decoders are ``ConfluentAvroDecoder``
(confluent.py: Avro in the Confluent framing, the default), ``JsonDecoder``
(json_values.py: JSON objects read as the topic's registered schema) and ``RawDecoder``
(raw.py: the value bytes as they are). ingest/plugins.py names them for the config.
"""

from ingest.decoders.arrow_types import UnsupportedSchema, arrow_schema_for
from ingest.decoders.base import DecodedChunk, Decoder, Quarantined, chunks, decode_stream
from ingest.decoders.confluent import ConfluentAvroDecoder
from ingest.decoders.json_values import JsonDecoder
from ingest.decoders.raw import RawDecoder

__all__ = [
    "ConfluentAvroDecoder",
    "DecodedChunk",
    "Decoder",
    "JsonDecoder",
    "Quarantined",
    "RawDecoder",
    "UnsupportedSchema",
    "arrow_schema_for",
    "chunks",
    "decode_stream",
]
