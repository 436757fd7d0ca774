"""The producer's settings under Kafka's producer key names, declared once (the ConfigDef
every component uses), so tools that take `--producer-property k=v` or a
`--producer.config` file refuse a wrong value with the key and value named, and
docs/configuration.md lists them. `producer_kwargs()` turns parsed settings into
`Producer(...)` keyword arguments; the security keys (`security.protocol`, `sasl.*`,
`ssl.*`: broker/client/security.py) become its `security`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from broker.client.security import split_security
from broker.config.definition import ConfigDef, ConfigError, at_least, one_of
from broker.records.compression import CODEC_NAMES
from broker.util.clock import MINUTE_MS, SECOND_MS


def _acks_problem(value: str) -> str | None:
    return None if value in ("all", "-1", "0", "1") else "value must be one of all, -1, 0, 1"


# Kafka key -> Producer keyword; bootstrap.servers is the Producer's first argument.
_KWARGS = {
    "acks": "acks",
    "compression.type": "compression",
    "linger.ms": "linger_ms",
    "batch.size": "batch_size",
    "enable.idempotence": "enable_idempotence",
    "client.id": "client_id",
    "request.timeout.ms": "request_timeout_ms",
    "retries": "retries",
    "delivery.timeout.ms": "delivery_timeout_ms",
    "buffer.memory": "buffer_memory",
    "max.block.ms": "max_block_ms",
    "transactional.id": "transactional_id",
    "transaction.timeout.ms": "transaction_timeout_ms",
}

PRODUCER_CONFIG = (
    ConfigDef("Producer (broker.client.producer.Producer, as the tools' producer properties)")
    .define(
        "bootstrap.servers",
        "list",
        None,
        "host:port pairs to fetch the cluster's metadata from (the tools' --bootstrap-server).",
        optional=True,
    )
    .define(
        "acks",
        "string",
        "all",
        "Acknowledgements the leader waits for: all (-1, the in-sync replicas), 1 (the "
        "leader's log) or 0 (no answer).",
        validator=_acks_problem,
    )
    .define(
        "compression.type",
        "string",
        "none",
        "Codec of the record batches.",
        validator=one_of(*CODEC_NAMES),
    )
    .define(
        "linger.ms", "double", 5, "How long a batch waits for more records.", validator=at_least(0)
    )
    .define(
        "batch.size",
        "int",
        1048576,
        "Bytes of records that make a batch full (sent at once).",
        validator=at_least(1),
    )
    .define(
        "enable.idempotence",
        "boolean",
        True,
        "Producer id and sequence numbers, so retries are not duplicated; needs acks=all "
        "(switched off with acks 0 or 1).",
    )
    .define("client.id", "string", "kafka-hourly", "Sent with every request.")
    .define(
        "request.timeout.ms",
        "int",
        30 * SECOND_MS,
        "How long a request waits for its answer.",
        validator=at_least(1),
    )
    .define(
        "retries",
        "int",
        2147483647,
        "Retries of a batch after retriable errors (bounded by delivery.timeout.ms).",
        validator=at_least(0),
    )
    .define(
        "delivery.timeout.ms",
        "int",
        2 * MINUTE_MS,
        "Time from send() until a record fails with its last error.",
        validator=at_least(1),
    )
    .define(
        "buffer.memory",
        "long",
        32 * 1024 * 1024,
        "Bytes of records waiting to be sent before send() blocks.",
        validator=at_least(1),
    )
    .define(
        "max.block.ms",
        "int",
        MINUTE_MS,
        "How long send() blocks on a full buffer or a topic's metadata, and how long "
        "init_transactions(), commit_transaction() and abort_transaction() wait by default.",
        validator=at_least(0),
    )
    .define(
        "transactional.id",
        "string",
        None,
        "Makes the producer transactional (init_transactions, begin/commit/abort_transaction, "
        "send_offsets_to_transaction); a newer producer with the same id fences this one. "
        "Needs enable.idempotence=true and acks=all (docs/contracts/transactions.md).",
        optional=True,
    )
    .define(
        "transaction.timeout.ms",
        "int",
        MINUTE_MS,
        "How long a transaction may stay open before the coordinator aborts it; at most "
        "the brokers' transaction.max.timeout.ms (else INVALID_TRANSACTION_TIMEOUT).",
        validator=at_least(1),
    )
)


def producer_kwargs(raw: Mapping[str, str]) -> tuple[list[str], dict[str, Any]]:
    """Producer properties (Kafka's names) -> (bootstrap servers, Producer keyword
    arguments, `security` among them). Raises ConfigError naming the key and value that
    is wrong or unknown."""
    security, rest = split_security(raw)
    settings = PRODUCER_CONFIG.parse(rest)
    if not settings["bootstrap.servers"]:
        raise ConfigError("Missing required configuration bootstrap.servers")
    kwargs = {_KWARGS[k]: settings[k] for k in _KWARGS}
    if kwargs["transactional_id"] is not None and (
        not kwargs["enable_idempotence"] or settings["acks"] not in ("all", "-1")
    ):
        raise ConfigError(
            f"Invalid value {kwargs['transactional_id']!r} for configuration "
            "transactional.id: needs enable.idempotence=true and acks=all"
        )
    kwargs["security"] = security
    return settings["bootstrap.servers"], kwargs
