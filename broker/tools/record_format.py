"""How kafka-console-consumer prints a record: Kafka's DefaultMessageFormatter, its
`--property` names and defaults, and the deserializers it is given by class name.

A line is `[CreateTime:T<sep>][Partition:P<sep>][Offset:O<sep>][h:v,h:v<sep>][key<sep>]value`
followed by `line.separator`; a null key or value prints `null.literal`; a record without
headers prints `NO_HEADERS`. Bytes are written as they are (ByteArrayDeserializer, the
default), so values are the text the producer sent.
"""

from __future__ import annotations

import struct
from collections.abc import Callable

from broker.config.definition import ConfigError
from broker.records.batch import Record

_PACKAGE = "org.apache.kafka.common.serialization."


def _fixed(name: str, fmt: str) -> Callable[[bytes], bytes]:
    size = struct.calcsize(fmt)

    def deserialize(data: bytes) -> bytes:
        if len(data) != size:
            raise ValueError(f"Size of data received by {name} is not {size}")
        return str(struct.unpack(fmt, data)[0]).encode()

    return deserialize


# Kafka's deserializer class names (with or without the package) -> bytes to print.
DESERIALIZERS: dict[str, Callable[[bytes], bytes]] = {
    "ByteArrayDeserializer": bytes,
    "StringDeserializer": lambda data: data.decode("utf-8", errors="replace").encode(),
    "ShortDeserializer": _fixed("ShortDeserializer", ">h"),
    "IntegerDeserializer": _fixed("IntegerDeserializer", ">i"),
    "LongDeserializer": _fixed("LongDeserializer", ">q"),
    "FloatDeserializer": _fixed("FloatDeserializer", ">f"),
    "DoubleDeserializer": _fixed("DoubleDeserializer", ">d"),
}

DEFAULTS = {
    "print.timestamp": "false",
    "print.key": "false",
    "print.offset": "false",
    "print.partition": "false",
    "print.headers": "false",
    "print.value": "true",
    "key.separator": "\t",
    "line.separator": "\n",
    "headers.separator": ",",
    "headers.key.separator": ":",
    "null.literal": "null",
    "key.deserializer": "ByteArrayDeserializer",
    "value.deserializer": "ByteArrayDeserializer",
    "headers.deserializer": "ByteArrayDeserializer",
}


def deserializer(name: str, key: str) -> Callable[[bytes], bytes]:
    found = DESERIALIZERS.get(name.removeprefix(_PACKAGE))
    if found is None:
        known = ", ".join(_PACKAGE + n for n in DESERIALIZERS)
        raise ConfigError(f"Invalid value {name!r} for {key}: expected one of {known}")
    return found


class RecordFormatter:
    """DefaultMessageFormatter: `format(topic, partition, record) -> bytes`; raises
    ValueError when a deserializer refuses the record's bytes."""

    def __init__(self, properties: dict[str, str]) -> None:
        unknown = sorted(set(properties) - set(DEFAULTS))
        if unknown:
            raise ConfigError(f"Unknown property {unknown[0]!r} (value {properties[unknown[0]]!r})")
        props = {**DEFAULTS, **properties}
        flags = {}
        for name in ("timestamp", "key", "offset", "partition", "headers", "value"):
            raw = props[f"print.{name}"].strip().lower()
            if raw not in ("true", "false"):
                raise ConfigError(
                    f"Invalid value {props[f'print.{name}']!r} for property print.{name}: "
                    "expected true or false"
                )
            flags[name] = raw == "true"
        self.flags = flags
        self.separator = props["key.separator"].encode()
        self.line_separator = props["line.separator"].encode()
        self.headers_separator = props["headers.separator"].encode()
        self.headers_key_separator = props["headers.key.separator"].encode()
        self.null = props["null.literal"].encode()
        self.key = deserializer(props["key.deserializer"], "key.deserializer")
        self.value = deserializer(props["value.deserializer"], "value.deserializer")
        self.header = deserializer(props["headers.deserializer"], "headers.deserializer")

    def _data(self, convert: Callable[[bytes], bytes], data: bytes | None) -> bytes:
        return self.null if data is None else convert(data)

    def format(self, partition: int, record: Record) -> bytes:
        columns = []
        if self.flags["timestamp"]:
            # The fetched record does not say whether its batch is LogAppendTime.
            columns.append(
                b"CreateTime:%d" % record.timestamp if record.timestamp >= 0 else b"NO_TIMESTAMP"
            )
        if self.flags["partition"]:
            columns.append(b"Partition:%d" % partition)
        if self.flags["offset"]:
            columns.append(b"Offset:%d" % record.offset)
        if self.flags["headers"]:
            columns.append(
                self.headers_separator.join(
                    name.encode() + self.headers_key_separator + self._data(self.header, value)
                    for name, value in record.headers
                )
                if record.headers
                else b"NO_HEADERS"
            )
        if self.flags["key"]:
            columns.append(self._data(self.key, record.key))
        if self.flags["value"]:
            columns.append(self._data(self.value, record.value))
        return self.separator.join(columns) + self.line_separator
