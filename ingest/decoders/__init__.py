"""Decoders: fetched Kafka records of one partition -> Arrow batches + quarantine.

``ConfluentAvroDecoder`` (confluent.py) is the one for Avro topics with the
Confluent framing; ``Decoder`` (base.py) is the plug point.
"""

from ingest.decoders.arrow_types import KAFKA_FIELDS, UnsupportedSchema, arrow_schema_for
from ingest.decoders.base import DecodedChunk, Decoder, Quarantined, chunks
from ingest.decoders.confluent import ConfluentAvroDecoder

__all__ = [
    "KAFKA_FIELDS",
    "ConfluentAvroDecoder",
    "DecodedChunk",
    "Decoder",
    "Quarantined",
    "UnsupportedSchema",
    "arrow_schema_for",
    "chunks",
]
