"""Every broker configuration key, declared once. Kafka's names and defaults where Kafka
has the key, so an existing server.properties reads the same here."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from broker.config.definition import (
    ConfigDef,
    ConfigError,
    at_least,
    between,
    load_properties,
    one_of,
)
from broker.config.listeners import (
    JAAS_KEY,
    SASL_MECHANISMS,
    Listener,
    check_listeners,
    listeners_problem,
    parse_listener,
    parse_protocol_map,
    protocol_map_problem,
    split_override,
)
from broker.log.cleaner import CleanerConfig
from broker.log.config import (
    MESSAGE_FORMAT_VERSION_DEFAULT,
    LogConfig,
    cleanup_policy_problem,
    message_format_version_problem,
)
from broker.records.log_validator import (
    COMPRESSION_TYPES,
    GZIP_DEFAULT_LEVEL,
    LONG_MAX,
    LZ4_DEFAULT_LEVEL,
    LZ4_LEVELS,
    ZSTD_DEFAULT_LEVEL,
    ZSTD_LEVELS,
    gzip_level_problem,
)
from broker.security.acl import AclError, parse_principal
from broker.security.authorizer import parse_super_users
from broker.security.principal import principal_rules_problem
from broker.util.clock import HOUR_MS, MINUTE_MS

# Kafka's authorizer class names: ours answers to both (2.4+ and the older one).
ACL_AUTHORIZER = "kafka.security.authorizer.AclAuthorizer"
AUTHORIZER_NAMES = (ACL_AUTHORIZER, "kafka.security.auth.SimpleAclAuthorizer")


def _super_users(value: str) -> str | None:
    for principal in parse_super_users(value):
        try:
            parse_principal(principal)
        except AclError as exc:
            return str(exc)
    return None


def _or(value: Any, fallback: Any) -> Any:
    """A key that may be unset, else the value it falls back to."""
    return fallback if value is None else value


def _log_dirs(value: list[str]) -> str | None:
    return None if value else "at least one directory is needed"


SERVER_CONFIG = (
    ConfigDef("Broker (conf/server.properties)")
    .define(
        "broker.id",
        "int",
        0,
        "Id of this broker in the cluster; unique per broker.",
        validator=at_least(0),
    )
    .define(
        "listeners",
        "list",
        ["PLAINTEXT://127.0.0.1:9092"],
        "Where the broker listens: comma-separated `NAME://host:port`, each NAME given a "
        "security protocol by `listener.security.protocol.map`; every listener gets its own "
        "socket. An empty host binds all interfaces; port 0 picks a free port (tests).",
        validator=listeners_problem,
        group="network",
    )
    .define(
        "advertised.listeners",
        "list",
        [],
        "Addresses given to clients in Metadata; defaults to "
        "`listeners` (with the port actually bound).",
        optional=True,
        validator=lambda v: listeners_problem(v) if v else None,
        group="network",
        default_doc="listeners",
    )
    .define(
        "socket.request.max.bytes",
        "int",
        104857600,
        "Largest request frame accepted; a larger declared size closes the connection.",
        validator=at_least(1),
        group="network",
    )
    .define(
        "queued.max.requests.per.connection",
        "int",
        200,
        "Requests of one connection handled before their answers are sent: while an "
        "acks=all Produce or a Fetch waits in a purgatory, the connection's next requests "
        "are read and handled (answers still go in request order), so one replication "
        "round trip acknowledges every Produce that arrived meanwhile. 1 handles one "
        "request at a time, as Kafka mutes a channel (docs/contracts/wire-protocol.md). "
        "An in-flight request holds its answer, not its frame.",
        validator=at_least(1),
        group="network",
    )
    .define(
        "listener.security.protocol.map",
        "list",
        ["PLAINTEXT:PLAINTEXT", "SSL:SSL", "SASL_PLAINTEXT:SASL_PLAINTEXT", "SASL_SSL:SASL_SSL"],
        "The security protocol of each listener name: `NAME:PROTOCOL,...` with PLAINTEXT, SSL, "
        "SASL_PLAINTEXT or SASL_SSL. Every name in `listeners` must be here.",
        validator=protocol_map_problem,
        group="security",
    )
    .define(
        "ssl.keystore.type",
        "string",
        "PEM",
        "Format of the key store; PEM only (a file holding the private key and the "
        "certificate chain). Per listener: `listener.name.<name>.ssl.keystore.type`.",
        validator=one_of("PEM"),
        group="security",
    )
    .define(
        "ssl.keystore.location",
        "string",
        None,
        "PEM file with this broker's private key and certificate chain; SSL and SASL_SSL "
        "listeners need it (or `ssl.keystore.key` with `ssl.keystore.certificate.chain`). Per "
        "listener: `listener.name.<name>.ssl.keystore.location`.",
        optional=True,
        group="security",
    )
    .define(
        "ssl.keystore.key",
        "password",
        None,
        "The private key as PEM text (Kafka's inline PEM key store, with "
        "`ssl.keystore.certificate.chain`), instead of `ssl.keystore.location`.",
        optional=True,
        group="security",
    )
    .define(
        "ssl.keystore.certificate.chain",
        "password",
        None,
        "The certificate chain as PEM text, with `ssl.keystore.key`.",
        optional=True,
        group="security",
    )
    .define(
        "ssl.key.password",
        "password",
        None,
        "Password of the private key in the key store, when it is encrypted.",
        optional=True,
        group="security",
    )
    .define(
        "ssl.truststore.type",
        "string",
        "PEM",
        "Format of the trust store; PEM only (CA certificates).",
        validator=one_of("PEM"),
        group="security",
    )
    .define(
        "ssl.truststore.location",
        "string",
        None,
        "PEM file of the CA certificates that client certificates (and, for the inter-broker "
        "client, other brokers' certificates) must chain to; unset: the system's CAs.",
        optional=True,
        group="security",
    )
    .define(
        "ssl.truststore.certificates",
        "password",
        None,
        "The trusted CA certificates as PEM text, instead of `ssl.truststore.location`.",
        optional=True,
        group="security",
    )
    .define(
        "ssl.endpoint.identification.algorithm",
        "string",
        "https",
        "`https`: this broker, as a client of other brokers, checks that their certificate "
        "names the host it reaches them at; empty: no check.",
        optional=True,
        validator=one_of("https", ""),
        group="security",
    )
    .define(
        "ssl.client.auth",
        "string",
        "none",
        "Client certificates on TLS listeners: `required` (refused without one), `requested` "
        "(checked when given) or `none`. The principal is taken from the certificate's subject "
        "(`ssl.principal.mapping.rules`).",
        validator=one_of("none", "requested", "required"),
        group="security",
    )
    .define(
        "ssl.enabled.protocols",
        "list",
        ["TLSv1.2", "TLSv1.3"],
        "TLS versions accepted; TLSv1.2 and TLSv1.3 only.",
        validator=lambda v: (
            None
            if v and all(p in ("TLSv1.2", "TLSv1.3") for p in v)
            else "value must be TLSv1.2 and/or TLSv1.3"
        ),
        group="security",
    )
    .define(
        "ssl.principal.mapping.rules",
        "string",
        "DEFAULT",
        "How a client certificate's subject (RFC 2253, e.g. `CN=alice,O=corp`) becomes the "
        "user name of principal `User:<name>`: comma-separated rules "
        "`RULE:<pattern>/<replacement>/[LU]` (the first whose pattern matches the whole "
        "subject wins; L/U lower/upper-cases) and `DEFAULT` (the subject unchanged).",
        validator=principal_rules_problem,
        group="security",
    )
    .define(
        "sasl.enabled.mechanisms",
        "list",
        list(SASL_MECHANISMS),
        "SASL mechanisms offered on SASL listeners (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512). Per "
        "listener: `listener.name.<name>.sasl.enabled.mechanisms`.",
        validator=lambda v: next(
            (f"unsupported mechanism {m!r}" for m in v if m not in SASL_MECHANISMS), None
        ),
        group="security",
    )
    .define(
        "sasl.jaas.config",
        "password",
        None,
        'JAAS-style login config, as Kafka: `<LoginModule> required username=".." '
        'password=".." user_<name>="<password>" ...;`. The `user_<name>` entries are '
        "the PLAIN users; `username`/`password` are what this broker sends to other brokers. "
        "Per listener and mechanism: `listener.name.<name>.<mechanism>.sasl.jaas.config` "
        "(mechanism in lower case, e.g. `plain`), which wins over this key.",
        optional=True,
        group="security",
    )
    .define(
        "sasl.scram.credentials.file",
        "string",
        None,
        "JSON file of the SCRAM credentials of a single broker, as Kafka stores them: "
        '`{"<user>": {"version": 1, "config": {"SCRAM-SHA-256": "salt=..,stored_key=..,'
        'server_key=..,iterations=4096"}}}`; re-read when it changes. Unset: no SCRAM user.',
        optional=True,
        group="security",
    )
    .define(
        "sasl.mechanism.inter.broker.protocol",
        "string",
        "PLAIN",
        "The SASL mechanism brokers use with each other on a SASL inter-broker listener; the "
        "credentials are the `username`/`password` of that listener's JAAS config.",
        validator=one_of(*SASL_MECHANISMS),
        group="security",
    )
    .define(
        "connections.max.reauth.ms",
        "long",
        0,
        "A SASL session's lifetime: clients must re-authenticate within it (KIP-368; told in "
        "SaslAuthenticate's session_lifetime_ms); a connection past it is closed at its next "
        "request. 0: sessions do not expire.",
        validator=at_least(0),
        group="security",
    )
    .define(
        "message.max.bytes",
        "int",
        1048588,
        "Largest record batch accepted (after compression, "
        "with batch overhead); larger batches get MESSAGE_TOO_LARGE.",
        validator=at_least(0),
        group="network",
        dynamic=True,
    )
    .define(
        "metrics.port",
        "int",
        None,
        "Port of the broker's Prometheus endpoint (`GET /metrics`, text format; "
        "broker/metrics/README.md). Unset: no endpoint and no metrics counted; 0 picks a free "
        "port (logged).",
        optional=True,
        validator=lambda v: None if v is None or 0 <= v <= 65535 else "must be 0..65535",
        group="metrics",
    )
    .define(
        "metrics.host",
        "string",
        None,
        "Address the Prometheus endpoint binds; empty binds all interfaces.",
        optional=True,
        group="metrics",
        default_doc="the first listener's host",
    )
    .define(
        "metrics.partition.series.enabled",
        "boolean",
        True,
        "Export per-partition series (log size and end offset, consumer lag and committed "
        "offsets per partition). Off, the same quantities are summed per topic (and group), "
        "which bounds the series count on brokers with many partitions.",
        group="metrics",
    )
    .define(
        "produce.record.validation",
        "string",
        "framing",
        "How much of each produced batch is checked beyond its header and CRC: `framing` walks "
        "the record lengths (the records exactly fill the batch); `full` decodes every record's "
        "fields as Kafka's LogValidator does, at about ten times the CPU cost.",
        validator=one_of("framing", "full"),
        group="network",
    )
    .define(
        "log.dirs",
        "list",
        ["/tmp/kafka-logs"],
        "Directories holding the partition logs.",
        validator=_log_dirs,
        group="log",
    )
    .define(
        "num.partitions",
        "int",
        1,
        "Partitions of a topic created without a count: auto-created, or CreateTopics with -1.",
        validator=at_least(1),
        group="log",
    )
    .define(
        "default.replication.factor",
        "int",
        1,
        "Replication factor of a topic created without one: auto-created, or CreateTopics with -1.",
        validator=at_least(1),
        group="log",
    )
    .define(
        "auto.create.topics.enable",
        "boolean",
        True,
        "Create a topic (`num.partitions`, `default.replication.factor`) when a Metadata "
        "request names one that does not exist and allows auto-creation (v4+ "
        "`allow_auto_topic_creation`; always in v0-v3). Produce never creates: a Produce to an "
        "unknown topic answers UNKNOWN_TOPIC_OR_PARTITION, as in Kafka; producers ask Metadata "
        "first, so a send to a new topic still creates it.",
        group="log",
    )
    .define(
        "delete.topic.enable",
        "boolean",
        True,
        "Whether DeleteTopics may delete topics.",
        group="log",
    )
    .define(
        "log.segment.bytes",
        "int",
        1073741824,
        "A segment rolls before it would exceed this size.",
        validator=at_least(1024),
        group="log",
        dynamic=True,
    )
    .define(
        "log.roll.hours",
        "int",
        168,
        "A segment rolls once its first batch is this old.",
        validator=at_least(1),
        group="log",
        dynamic=True,
    )
    .define(
        "log.roll.ms",
        "long",
        None,
        "Overrides log.roll.hours when set.",
        optional=True,
        validator=at_least(1),
        group="log",
        dynamic=True,
        synonyms=("log.roll.hours",),
    )
    .define(
        "log.roll.jitter.hours",
        "int",
        0,
        "Each new segment rolls a random amount below min(this, the roll time) earlier, so "
        "that segments created together do not roll together (topic override: "
        "segment.jitter.ms).",
        validator=at_least(0),
        group="log",
        dynamic=True,
    )
    .define(
        "log.roll.jitter.ms",
        "long",
        None,
        "Overrides log.roll.jitter.hours when set.",
        optional=True,
        validator=at_least(0),
        group="log",
        dynamic=True,
        synonyms=("log.roll.jitter.hours",),
    )
    .define(
        "log.retention.hours",
        "int",
        168,
        "Segments whose newest record is older are deleted.",
        group="log",
        dynamic=True,
    )
    .define(
        "log.retention.minutes",
        "int",
        None,
        "Overrides log.retention.hours when set.",
        optional=True,
        group="log",
        dynamic=True,
        synonyms=("log.retention.hours",),
    )
    .define(
        "log.retention.ms",
        "long",
        None,
        "Overrides log.retention.minutes/hours when set; -1 keeps data forever.",
        optional=True,
        validator=at_least(-1),
        group="log",
        dynamic=True,
        synonyms=("log.retention.minutes", "log.retention.hours"),
    )
    .define(
        "log.retention.bytes",
        "long",
        -1,
        "Oldest segments are deleted while a partition is larger; -1 means no limit.",
        validator=at_least(-1),
        group="log",
        dynamic=True,
    )
    .define(
        "log.retention.check.interval.ms",
        "long",
        300000,
        "How often retention runs.",
        validator=at_least(1),
        group="log",
    )
    .define(
        "log.flush.interval.messages",
        "long",
        9223372036854775807,
        "fsync a partition after this "
        "many unflushed messages (default: leave it to the OS, as Kafka does).",
        validator=at_least(1),
        group="log",
        dynamic=True,
    )
    .define(
        "log.flush.interval.ms",
        "long",
        None,
        "fsync a partition when its oldest unflushed data is this old; unset: leave it to the OS.",
        optional=True,
        validator=at_least(0),
        group="log",
        dynamic=True,
    )
    .define(
        "log.flush.scheduler.interval.ms",
        "long",
        1000,
        "How often the time-based flush is checked.",
        validator=at_least(1),
        group="log",
    )
    .define(
        "log.index.interval.bytes",
        "int",
        4096,
        "Bytes of log between two offset index entries (topic override: index.interval.bytes).",
        validator=at_least(0),
        group="log",
        dynamic=True,
    )
    .define(
        "log.index.size.max.bytes",
        "int",
        10485760,
        "The largest offset or time index of a segment: at most this / 8 offset entries and "
        "this / 12 time entries; a segment whose index is full rolls (topic override: "
        "segment.index.bytes).",
        validator=at_least(4),
        group="log",
        dynamic=True,
    )
    .define(
        "log.preallocate",
        "boolean",
        False,
        "Create each new segment file log.segment.bytes long (sparse) and cut it to its data "
        "when it rolls or closes; recovery cuts the zeros a crash leaves (topic override: "
        "preallocate).",
        group="log",
        dynamic=True,
    )
    .define(
        "log.message.timestamp.type",
        "string",
        "CreateTime",
        "Which time a record's timestamp holds: `CreateTime` keeps the producer's, "
        "`LogAppendTime` stamps each batch with the broker's clock when it is appended "
        "(topic override: message.timestamp.type).",
        validator=one_of("CreateTime", "LogAppendTime"),
        group="log",
        dynamic=True,
    )
    # -- append validation: compression and timestamps (broker/records/log_validator.py) --
    .define(
        "compression.type",
        "string",
        "producer",
        "The codec the leader stores batches with: `producer` keeps each batch's own; "
        "`uncompressed`, `gzip`, `snappy`, `lz4` or `zstd` recompresses batches written "
        'with another (docs/contracts/log.md, "Append validation"; topic override: '
        "compression.type).",
        validator=one_of(*COMPRESSION_TYPES),
        group="log",
        dynamic=True,
    )
    .define(
        "compression.gzip.level",
        "int",
        GZIP_DEFAULT_LEVEL,
        "gzip level of batches the leader recompresses to gzip: 1..9, or -1 for zlib's "
        "default (6) (KIP-390; topic override: compression.gzip.level).",
        validator=gzip_level_problem,
        group="log",
        dynamic=True,
    )
    .define(
        "compression.lz4.level",
        "int",
        LZ4_DEFAULT_LEVEL,
        "lz4 level of batches the leader recompresses to lz4: 1..17; 9 uses LZ4's fast "
        "compressor, any other level its high-compression one, as Kafka (KIP-390).",
        validator=between(*LZ4_LEVELS),
        group="log",
        dynamic=True,
    )
    .define(
        "compression.zstd.level",
        "int",
        ZSTD_DEFAULT_LEVEL,
        "zstd level of batches the leader recompresses to zstd: -131072..22 (KIP-390).",
        validator=between(*ZSTD_LEVELS),
        group="log",
        dynamic=True,
    )
    .define(
        "log.message.timestamp.difference.max.ms",
        "long",
        LONG_MAX,
        "Deprecated (Kafka 3.6): the before and after window of both "
        "log.message.timestamp.before.max.ms and .after.max.ms while those are at their "
        "default (topic override: message.timestamp.difference.max.ms).",
        validator=at_least(0),
        group="log",
        dynamic=True,
    )
    .define(
        "log.message.timestamp.before.max.ms",
        "long",
        LONG_MAX,
        "With CreateTime, a record whose timestamp is more than this before the leader's "
        "clock is refused (INVALID_TIMESTAMP for its partition; KIP-937; topic override: "
        "message.timestamp.before.max.ms).",
        validator=at_least(0),
        group="log",
        dynamic=True,
    )
    .define(
        "log.message.timestamp.after.max.ms",
        "long",
        LONG_MAX,
        "With CreateTime, a record whose timestamp is more than this after the leader's "
        "clock is refused (INVALID_TIMESTAMP; KIP-937; topic override: "
        "message.timestamp.after.max.ms).",
        validator=at_least(0),
        group="log",
        dynamic=True,
    )
    .define(
        "log.segment.delete.delay.ms",
        "long",
        60000,
        "Delay before a segment removed by retention, compaction or topic deletion is "
        "unlinked; fetches in flight may still read it (topic override: file.delete.delay.ms).",
        validator=at_least(0),
        group="log",
        dynamic=True,
    )
    .define(
        "log.message.format.version",
        "string",
        MESSAGE_FORMAT_VERSION_DEFAULT,
        "Deprecated, and ignored as by Kafka 3.x with an inter-broker protocol of 3.0 or "
        "later: batches are always stored in the v2 format. A known Kafka version (0.10.2, "
        "2.8, 3.0-IV1, ...) is accepted (topic override: message.format.version).",
        validator=message_format_version_problem,
        group="log",
    )
    .define(
        "log.message.downconversion.enable",
        "boolean",
        True,
        "No effect: this broker never down-converts batches (its Fetch starts at v4, whose "
        "clients read the v2 format) (topic override: message.downconversion.enable).",
        group="log",
        dynamic=True,
    )
    .define(
        "log.cleanup.policy",
        "list",
        ["delete"],
        "What happens to old segments: `delete` removes them by retention time and size; "
        "`compact` lets the log cleaner keep only the latest record per key (records without "
        "a key are refused); `compact,delete` does both (topic override: cleanup.policy).",
        validator=cleanup_policy_problem,
        group="log cleaner",
        dynamic=True,
    )
    .define(
        "log.cleaner.enable",
        "boolean",
        True,
        "Run the log cleaner, which compacts the topics whose cleanup policy includes "
        "`compact` (`_schemas`, `__consumer_offsets`); without it they grow forever.",
        group="log cleaner",
    )
    .define(
        "log.cleaner.threads",
        "int",
        1,
        "Threads that clean logs; each cleans one log at a time.",
        validator=between(1, 64),
        group="log cleaner",
    )
    .define(
        "log.cleaner.dedupe.buffer.size",
        "long",
        134217728,
        "Memory for the cleaners' maps of key to latest offset, shared by the threads; a "
        "dirty section with more keys than fit is cleaned in several passes.",
        validator=at_least(65536),
        group="log cleaner",
    )
    .define(
        "log.cleaner.io.buffer.size",
        "int",
        524288,
        "Bytes a cleaner thread reads from a segment at a time.",
        validator=at_least(4096),
        group="log cleaner",
    )
    .define(
        "log.cleaner.backoff.ms",
        "long",
        15000,
        "How long a cleaner thread sleeps when no log needs cleaning.",
        validator=at_least(0),
        group="log cleaner",
    )
    .define(
        "log.cleaner.min.cleanable.ratio",
        "double",
        0.5,
        "A log is cleaned once its dirty part (written since the last cleaning) passes this "
        "share of it (topic override: min.cleanable.dirty.ratio).",
        validator=between(0, 1),
        group="log cleaner",
        dynamic=True,
    )
    .define(
        "log.cleaner.delete.retention.ms",
        "long",
        86400000,
        "How long a tombstone (a record with a key and a null value) is kept after the "
        "cleaner first saw it, so consumers reading the log meanwhile see the deletion "
        "(topic override: delete.retention.ms).",
        validator=at_least(0),
        group="log cleaner",
        dynamic=True,
    )
    .define(
        "log.cleaner.min.compaction.lag.ms",
        "long",
        0,
        "Records stay uncompacted at least this long: a segment whose newest record is "
        "younger is not cleaned (topic override: min.compaction.lag.ms).",
        validator=at_least(0),
        group="log cleaner",
        dynamic=True,
    )
    .define(
        "log.cleaner.max.compaction.lag.ms",
        "long",
        LONG_MAX,
        "Records stay uncompacted at most about this long: a compacted log whose oldest "
        "dirty segment's first batch is older is cleaned whatever its dirty ratio, and its "
        "active segment rolls by then (KIP-354; topic override: max.compaction.lag.ms).",
        validator=at_least(1),
        group="log cleaner",
        dynamic=True,
    )
    .define(
        "transactional.id.expiration.ms",
        "long",
        604800000,
        "A transactional id with no open transaction and no change for this long is "
        "forgotten by its coordinator (its state record is removed).",
        validator=at_least(1),
        group="producers",
    )
    .define(
        # KIP-854: a partition's producer ids (idempotent or transactional) expire on
        # their own clock, shorter than the coordinator's transactional ids.
        "producer.id.expiration.ms",
        "int",
        86400000,
        "A producer id that wrote nothing to a partition for this long is forgotten by "
        "that partition (its sequence and epoch), unless it has a transaction open there; "
        "a later batch of it then starts afresh (KIP-854).",
        validator=at_least(1),
        group="producers",
        dynamic=True,
    )
    .define(
        "producer.id.expiration.check.interval.ms",
        "int",
        600000,
        "How often the partitions are searched for producer ids idle longer than "
        "producer.id.expiration.ms.",
        validator=at_least(1),
        group="producers",
    )
    .define(
        "max.idempotence.batches.to.retain",
        "int",
        5,
        "Recent batches per producer kept to answer "
        "retried duplicates (the clients keep at most 5 in flight).",
        validator=between(1, 1000),
        group="producers",
    )
    # Transactions (KIP-98): the transaction coordinator (broker/transactions/,
    # docs/contracts/transactions.md).
    .define(
        "transaction.state.log.num.partitions",
        "int",
        50,
        "Partitions of __transaction_state; the coordinator of a transactional id is the "
        "leader of its partition (Java's String.hashCode of the id, modulo this). Fixed "
        "once the topic exists.",
        validator=at_least(1),
        group="transactions",
    )
    .define(
        "transaction.state.log.replication.factor",
        "int",
        3,
        "Replication factor of __transaction_state; fewer when fewer brokers are alive at "
        "its creation.",
        validator=at_least(1),
        group="transactions",
    )
    .define(
        "transaction.state.log.min.isr",
        "int",
        2,
        "min.insync.replicas of __transaction_state: a state change is acknowledged only "
        "when this many replicas have it (at most the replication factor the topic was "
        "created with).",
        validator=at_least(1),
        group="transactions",
    )
    .define(
        "transaction.state.log.segment.bytes",
        "int",
        104857600,
        "Segment size of __transaction_state (smaller segments compact sooner and load faster).",
        validator=at_least(1),
        group="transactions",
    )
    .define(
        "transaction.max.timeout.ms",
        "int",
        900000,
        "Longest transaction.timeout.ms a producer may ask for in InitProducerId (else "
        "INVALID_TRANSACTION_TIMEOUT), so a hung producer cannot hold back read_committed "
        "consumers for longer.",
        validator=at_least(1),
        group="transactions",
    )
    .define(
        "transaction.abort.timed.out.transaction.cleanup.interval.ms",
        "int",
        10000,
        "How often open transactions are checked against their timeout; one past it is "
        "aborted and its producer fenced.",
        validator=at_least(1),
        group="transactions",
    )
    .define(
        "transaction.remove.expired.transaction.cleanup.interval.ms",
        "int",
        3600000,
        "How often transactional ids idle longer than transactional.id.expiration.ms are "
        "removed from __transaction_state.",
        validator=at_least(1),
        group="transactions",
    )
    .define(
        "transaction.partition.verification.enable",
        "boolean",
        True,
        "Before a transactional producer's first batch at a partition is appended, the "
        "partition's leader asks the transaction coordinator whether the partition is in "
        "the producer's ongoing transaction (KIP-890 part 1) and refuses it if not "
        "(INVALID_TXN_STATE), so a late or zombie batch cannot open a transaction nobody "
        "will end.",
        group="transactions",
    )
    .define(
        "transaction.version",
        "int",
        2,
        "The finalized level of the `transaction.version` feature this broker advertises "
        "in ApiVersions (supported 0-2). At 2 (KIP-890 part 2, Kafka 4's default) clients "
        "may use EndTxn v5, Produce v12 and TxnOffsetCommit v5: every transaction end "
        "bumps the producer epoch, and a transactional Produce v12 or TxnOffsetCommit v5 "
        "adds its partition (the group's offsets partition) to the transaction itself; "
        "below 2 those are served as Produce v11 and TxnOffsetCommit v4, and clients keep "
        "to the older protocol (docs/contracts/transactions.md).",
        validator=between(0, 2),
        group="transactions",
    )
    .define(
        "zookeeper.connect",
        "string",
        "",
        "ZooKeeper connection string for cluster mode (`host:port[,host:port...][/chroot]`; "
        "the chroot is created if missing); empty runs a single broker without ZooKeeper.",
        optional=True,
        group="cluster",
    )
    .define(
        "zookeeper.session.timeout.ms",
        "int",
        18000,
        "ZooKeeper session timeout: a broker whose session expires is dead to the cluster "
        "(its registration goes, the controller moves its leaderships).",
        validator=at_least(1000),
        group="cluster",
    )
    .define(
        "zookeeper.connection.timeout.ms",
        "int",
        None,
        "How long start-up waits to connect to ZooKeeper; unset: the session timeout.",
        optional=True,
        validator=at_least(100),
        group="cluster",
        default_doc="zookeeper.session.timeout.ms",
    )
    .define(
        "broker.rack",
        "string",
        None,
        "The rack of this broker; with a rack on every broker, the replicas of a new "
        "partition land on distinct racks where there are enough.",
        optional=True,
        group="cluster",
    )
    .define(
        "min.insync.replicas",
        "int",
        1,
        "With acks=all, the in-sync replicas a write needs: fewer refuse it before the "
        "append (NOT_ENOUGH_REPLICAS), or answer NOT_ENOUGH_REPLICAS_AFTER_APPEND when the "
        "ISR shrank while it waited (topic override: min.insync.replicas).",
        validator=at_least(1),
        group="cluster",
        dynamic=True,
    )
    .define(
        "unclean.leader.election.enable",
        "boolean",
        False,
        "Elect a replica outside the ISR when no in-sync replica is alive (availability "
        "over durability: acknowledged writes can be lost); topic override of the same name.",
        group="cluster",
        dynamic=True,
    )
    .define(
        "replica.lag.time.max.ms",
        "long",
        30000,
        "A follower that has not caught up to the leader's log end for this long leaves the ISR.",
        validator=at_least(1),
        group="cluster",
    )
    .define(
        "replica.fetch.max.bytes",
        "int",
        1048576,
        "Record bytes per partition a follower asks for in each fetch (a larger first batch "
        "comes whole when it is the first data of the answer: docs/contracts/fetch.md).",
        validator=at_least(1),
        group="cluster",
    )
    .define(
        "replica.fetch.response.max.bytes",
        "int",
        10485760,
        "Record bytes a follower's fetch asks for over all its partitions (a larger first "
        "batch of the first partition with data still comes whole).",
        validator=at_least(1),
        group="cluster",
    )
    .define(
        "replica.fetch.wait.max.ms",
        "int",
        500,
        "How long a follower's fetch waits at the leader for new data; keep it below "
        "replica.lag.time.max.ms.",
        validator=at_least(0),
        group="cluster",
    )
    .define(
        "replica.fetch.min.bytes",
        "int",
        1,
        "Bytes a follower's fetch waits for at the leader.",
        validator=at_least(1),
        group="cluster",
    )
    .define(
        "replica.fetch.backoff.ms",
        "int",
        1000,
        "Pause of a replica fetcher after an error before it fetches again.",
        validator=at_least(0),
        group="cluster",
    )
    .define(
        "max.incremental.fetch.session.cache.slots",
        "int",
        1000,
        "Fetch sessions (KIP-227) this broker keeps: what each follower or consumer fetcher "
        "already has, so its fetches name and answer only what changed.",
        validator=at_least(0),
        group="cluster",
    )
    .define(
        "min.incremental.fetch.session.eviction.ms",
        "int",
        120000,
        "A fetch session unused this long may be evicted for a new one; a younger one only "
        "by a follower's session displacing a consumer's.",
        validator=at_least(0),
        group="cluster",
    )
    .define(
        "num.replica.fetchers",
        "int",
        1,
        "Fetchers (connections) per source broker; the partitions of a leader are spread "
        "over them.",
        validator=at_least(1),
        group="cluster",
    )
    .define(
        "replica.high.watermark.checkpoint.interval.ms",
        "long",
        5000,
        "How often high watermarks are written to replication-offset-checkpoint.",
        validator=at_least(1),
        group="cluster",
    )
    .define(
        "controller.socket.timeout.ms",
        "int",
        30000,
        "Timeout of the controller's requests to brokers.",
        validator=at_least(1),
        group="cluster",
    )
    .define(
        "controlled.shutdown.enable",
        "boolean",
        True,
        "On SIGTERM, ask the controller to move this broker's leaderships away before "
        "stopping, so clients see only retriable errors.",
        group="cluster",
    )
    .define(
        "controlled.shutdown.max.retries",
        "int",
        3,
        "Attempts at a controlled shutdown before stopping anyway.",
        validator=at_least(1),
        group="cluster",
    )
    .define(
        "controlled.shutdown.retry.backoff.ms",
        "long",
        5000,
        "Pause between controlled shutdown attempts.",
        validator=at_least(0),
        group="cluster",
    )
    .define(
        "inter.broker.listener.name",
        "string",
        None,
        "The listener brokers use to reach each other (replication, controller requests); "
        "unset: the first of `listeners`.",
        optional=True,
        group="cluster",
        default_doc="the first listener",
    )
    .define(
        "auto.leader.rebalance.enable",
        "boolean",
        True,
        "The controller moves leadership back to preferred replicas (the first of each "
        "partition's replicas) when a broker leads too few of its own partitions.",
        group="cluster",
    )
    .define(
        "leader.imbalance.per.broker.percentage",
        "int",
        10,
        "The share (in percent) of a broker's preferred partitions it may not lead before "
        "the automatic rebalance gives them back.",
        validator=between(0, 100),
        group="cluster",
    )
    .define(
        "leader.replication.throttled.rate",
        "long",
        2**63 - 1,
        "Bytes per second this broker, as a leader, sends to followers of throttled replicas "
        "(topic leader.replication.throttled.replicas) that are out of the ISR; set by "
        "reassignments with a throttle.",
        validator=at_least(0),
        group="cluster",
        dynamic=True,
    )
    .define(
        "follower.replication.throttled.rate",
        "long",
        2**63 - 1,
        "Bytes per second this broker, as a follower out of the ISR, fetches for throttled "
        "replicas (topic follower.replication.throttled.replicas).",
        validator=at_least(0),
        group="cluster",
        dynamic=True,
    )
    .define(
        "leader.imbalance.check.interval.seconds",
        "long",
        300,
        "How often the controller checks the leader imbalance.",
        validator=at_least(1),
        group="cluster",
    )
    .define(
        "offsets.topic.num.partitions",
        "int",
        50,
        "Partitions of __consumer_offsets, created when a client first looks for a group "
        "coordinator; the coordinator of a group is the leader of its partition, so this "
        "spreads groups over the brokers. Fixed once the topic exists.",
        validator=between(1, 10000),
        group="groups",
    )
    .define(
        "offsets.topic.replication.factor",
        "int",
        3,
        "Replication factor of __consumer_offsets; fewer when fewer brokers are alive at "
        "its creation (with a warning).",
        validator=at_least(1),
        group="groups",
    )
    .define(
        "offsets.topic.segment.bytes",
        "int",
        104857600,
        "Segment size of __consumer_offsets (smaller segments compact sooner and load faster).",
        validator=at_least(1024),
        group="groups",
    )
    .define(
        "offsets.retention.minutes",
        "int",
        10080,
        "Committed offsets of a group with no members are removed this long after it became "
        "empty (offsets of a group that never had members: after their last commit).",
        validator=at_least(1),
        group="groups",
    )
    .define(
        "offsets.retention.check.interval.ms",
        "long",
        600000,
        "How often expired offsets are looked for.",
        validator=at_least(1),
        group="groups",
    )
    .define(
        "offsets.commit.timeout.ms",
        "int",
        5000,
        "How long an offset commit or group write waits for the replicas of its "
        "__consumer_offsets partition before failing with a retriable error.",
        validator=at_least(1),
        group="groups",
    )
    .define(
        "offset.metadata.max.bytes",
        "int",
        4096,
        "Longest metadata string an offset commit may carry (else OFFSET_METADATA_TOO_LARGE).",
        validator=at_least(0),
        group="groups",
    )
    .define(
        "offsets.load.buffer.size",
        "int",
        5242880,
        "Bytes read at a time when a coordinator loads an offsets partition (the broker "
        "serves other requests between reads).",
        validator=at_least(1),
        group="groups",
    )
    .define(
        "group.min.session.timeout.ms",
        "int",
        6000,
        "Shortest session timeout a member may ask for (else INVALID_SESSION_TIMEOUT).",
        validator=at_least(1),
        group="groups",
    )
    .define(
        "group.max.session.timeout.ms",
        "int",
        1800000,
        "Longest session timeout a member may ask for (else INVALID_SESSION_TIMEOUT).",
        validator=at_least(1),
        group="groups",
    )
    .define(
        "group.initial.rebalance.delay.ms",
        "int",
        3000,
        "How long the first rebalance of an empty group waits for more members (extended "
        "by each joiner, at most the rebalance timeout), so a starting group does not "
        "rebalance once per member.",
        validator=at_least(0),
        group="groups",
    )
    .define(
        "group.max.size",
        "int",
        2147483647,
        "Most members a group may have (further joins: GROUP_MAX_SIZE_REACHED).",
        validator=at_least(1),
        group="groups",
    )
    .define(
        "authorizer.class.name",
        "string",
        "",
        "Empty: no authorization (every connection may call every API). Kafka's "
        f"{ACL_AUTHORIZER}: ACLs decide (docs/contracts/security.md, Authorization), kept "
        "in ZooKeeper in a cluster and in acls.json in the first log dir of a single broker.",
        validator=one_of("", *AUTHORIZER_NAMES),
        group="authorization",
    )
    .define(
        "super.users",
        "string",
        "",
        "Principals allowed everything whatever the ACLs say, separated by semicolons "
        "(User:admin;User:broker).",
        validator=_super_users,
        group="authorization",
    )
    .define(
        "allow.everyone.if.no.acl.found",
        "boolean",
        False,
        "Allow an operation on a resource that no ACL applies to at all (else denied).",
        group="authorization",
    )
)


@dataclass(frozen=True)
class BrokerConfig:
    """The validated broker configuration, with derived values computed once."""

    values: dict[str, Any]
    # The keys as given (properties file and overrides, before defaults): what Kafka calls
    # the static broker config, shown as such by DescribeConfigs.
    given: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_file(cls, path: str | Path, overrides: list[str] = ()) -> BrokerConfig:
        return cls.from_mapping(load_properties(path, overrides))

    @classmethod
    def from_mapping(cls, raw: dict[str, Any]) -> BrokerConfig:
        config = cls(SERVER_CONFIG.parse(raw, allow_unknown=("listener.name.",)), dict(raw))
        try:
            check_listeners(config)
            for name in config.values:  # each per-listener override parses as its key
                split = split_override(name)
                if split is not None:
                    config.listener_value(*split)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        return config

    def __getitem__(self, key: str) -> Any:
        return self.values[key]

    @property
    def broker_id(self) -> int:
        return self.values["broker.id"]

    @property
    def listeners(self) -> list[Listener]:
        return [parse_listener(item) for item in self.values["listeners"]]

    @property
    def advertised_listeners(self) -> list[Listener] | None:
        items = self.values["advertised.listeners"]
        return [parse_listener(item) for item in items] if items else None

    @property
    def inter_broker_listener(self) -> str:
        """The listener brokers reach each other on: `inter.broker.listener.name`, else
        the first listener's."""
        name = self.values["inter.broker.listener.name"]
        return name.upper() if name else self.listeners[0].name

    @property
    def protocol_map(self) -> dict[str, str]:
        return parse_protocol_map(self.values["listener.security.protocol.map"])

    def security_protocol(self, listener: str) -> str:
        return self.protocol_map[listener]

    def listener_value(self, listener: str, key: str) -> Any:
        """`listener.name.<listener>.<key>` when set (Kafka's per-listener override), else
        the broker-wide `key`. JAAS configs are per mechanism: `<mech>.sasl.jaas.config`."""
        for name, raw in self.values.items():
            if split_override(name) == (listener.upper(), key):
                declared = SERVER_CONFIG.keys[JAAS_KEY if key.endswith(JAAS_KEY) else key]
                return replace(declared, name=name).parse(raw)
        return self.values[JAAS_KEY if key.endswith(JAAS_KEY) else key]

    @property
    def cluster_mode(self) -> bool:
        return bool(self.values["zookeeper.connect"])

    @property
    def log_dirs(self) -> list[Path]:
        return [Path(d) for d in self.values["log.dirs"]]

    @property
    def retention_ms(self) -> int:
        v = self.values
        if v["log.retention.ms"] is not None:
            return v["log.retention.ms"]
        if v["log.retention.minutes"] is not None:
            return v["log.retention.minutes"] * MINUTE_MS
        return v["log.retention.hours"] * HOUR_MS

    @property
    def log_config(self) -> LogConfig:
        v = self.values
        roll_ms = (
            v["log.roll.ms"] if v["log.roll.ms"] is not None else v["log.roll.hours"] * HOUR_MS
        )
        return LogConfig(
            segment_bytes=v["log.segment.bytes"],
            segment_ms=roll_ms,
            retention_ms=self.retention_ms,
            retention_bytes=v["log.retention.bytes"],
            flush_interval_messages=v["log.flush.interval.messages"],
            flush_interval_ms=_or(v["log.flush.interval.ms"], LONG_MAX),
            index_interval_bytes=v["log.index.interval.bytes"],
            file_delete_delay_ms=v["log.segment.delete.delay.ms"],
            max_message_bytes=v["message.max.bytes"],
            log_append_time=v["log.message.timestamp.type"] == "LogAppendTime",
            min_insync_replicas=v["min.insync.replicas"],
            unclean_leader_election=v["unclean.leader.election.enable"],
            cleanup_policy=tuple(v["log.cleanup.policy"]),
            delete_retention_ms=v["log.cleaner.delete.retention.ms"],
            min_cleanable_dirty_ratio=v["log.cleaner.min.cleanable.ratio"],
            min_compaction_lag_ms=v["log.cleaner.min.compaction.lag.ms"],
            segment_jitter_ms=_or(v["log.roll.jitter.ms"], v["log.roll.jitter.hours"] * HOUR_MS),
            segment_index_bytes=v["log.index.size.max.bytes"],
            preallocate=v["log.preallocate"],
            max_compaction_lag_ms=v["log.cleaner.max.compaction.lag.ms"],
            # -- append validation: compression and timestamps --
            compression_type=v["compression.type"],
            compression_gzip_level=v["compression.gzip.level"],
            compression_lz4_level=v["compression.lz4.level"],
            compression_zstd_level=v["compression.zstd.level"],
            timestamp_difference_max_ms=v["log.message.timestamp.difference.max.ms"],
            timestamp_before_max_ms=v["log.message.timestamp.before.max.ms"],
            timestamp_after_max_ms=v["log.message.timestamp.after.max.ms"],
        )

    @property
    def cleaner_config(self) -> CleanerConfig:
        v = self.values
        return CleanerConfig(
            enabled=v["log.cleaner.enable"],
            threads=v["log.cleaner.threads"],
            dedupe_buffer_size=v["log.cleaner.dedupe.buffer.size"],
            io_buffer_size=v["log.cleaner.io.buffer.size"],
            backoff_ms=v["log.cleaner.backoff.ms"],
        )


__all__ = ["SERVER_CONFIG", "BrokerConfig", "ConfigError", "Listener", "parse_listener"]

# What conf/server.properties sets (the embedded single-broker default); the file itself
# is generated from SERVER_CONFIG by `python -m broker config-docs --properties`.
SAMPLE_SETTINGS = {
    "broker.id": "0",
    "listeners": "PLAINTEXT://127.0.0.1:9092",
    "log.dirs": "var/kafka-logs",
    "num.partitions": "3",
}
SAMPLE_HEADER = """Broker configuration. Generated from broker/config/server.py (SERVER_CONFIG):
regenerate with `python -m broker config-docs --properties > conf/server.properties`.
Start a broker with `python -m broker start conf/server.properties [--override key=value ...]`."""
