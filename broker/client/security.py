"""How our clients secure a connection: the one place for TLS and SASL settings.

`SecurityConfig` travels from Producer, SimpleConsumer, GroupConsumer, AdminClient and
ClusterMetadata down to every BrokerConnection, which wraps the socket in TLS and runs
the SASL exchange (broker/security/sasl_client.py) before any other request
(docs/contracts/security.md, "Clients").

The properties the tools and the load read use the client names users know: Kafka's
Java client's (`security.protocol`, `ssl.truststore.location`, `sasl.mechanism`,
`sasl.jaas.config`, `ssl.endpoint.identification.algorithm`) and librdkafka's
(`ssl.ca.location`, `ssl.certificate.location`, `ssl.key.location`, `sasl.mechanisms`,
`sasl.username`, `sasl.password`). `SECURITY_CONFIG` declares them once;
`split_security()` takes them out of a component's properties before the component
parses the rest. Certificates and keys are PEM files (Java's JKS stores are not read).
"""

from __future__ import annotations

import argparse
import functools
import re
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from broker.config.definition import ConfigDef, ConfigError, load_properties, one_of
from broker.protocol.errors import KafkaError

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


class TlsError(KafkaError):
    """The broker's certificate was refused (unknown CA, wrong host name) or ours was:
    a setting to fix, so it is raised at once instead of being retried. Kafka has no
    error code for it (its clients' SslAuthenticationException is local too)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        Exception.__init__(self, message)  # no code name in front: there is none


@dataclass(frozen=True)
class SecurityConfig:
    """A connection's security: the protocol, TLS files and SASL login. Secrets are left
    out of repr() so they never reach a log."""

    security_protocol: str = "PLAINTEXT"
    ssl_cafile: str | None = None
    ssl_certfile: str | None = None
    ssl_keyfile: str | None = None
    ssl_password: str | None = None
    ssl_check_hostname: bool = True
    sasl_mechanism: str | None = None
    sasl_plain_username: str | None = None
    sasl_plain_password: str | None = None

    def __post_init__(self) -> None:
        if self.security_protocol not in SECURITY_PROTOCOLS:
            raise ConfigError(
                f"Invalid value {self.security_protocol!r} for configuration security.protocol: "
                f"value must be one of {', '.join(SECURITY_PROTOCOLS)}"
            )
        if not self.uses_sasl:
            return
        if self.sasl_mechanism not in SASL_MECHANISMS:
            raise ConfigError(
                f"Invalid value {self.sasl_mechanism!r} for configuration sasl.mechanism: "
                f"{self.security_protocol} needs one of {', '.join(SASL_MECHANISMS)}"
            )
        if not self.sasl_plain_username or self.sasl_plain_password is None:
            raise ConfigError(
                f"Missing required configuration sasl.username/sasl.password (or "
                f"sasl.jaas.config) for security.protocol {self.security_protocol}"
            )

    def __repr__(self) -> str:
        shown = {
            f.name: getattr(self, f.name)
            for f in fields(self)
            if f.name not in ("ssl_password", "sasl_plain_password")
        }
        return "SecurityConfig(" + ", ".join(f"{k}={v!r}" for k, v in shown.items()) + ")"

    @property
    def uses_tls(self) -> bool:
        return self.security_protocol in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        return self.security_protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    def ssl_context(self) -> ssl.SSLContext:
        """The TLS context of these settings, built once (it reads the files)."""
        return _ssl_context(self)


PLAINTEXT = SecurityConfig()


@functools.cache
def _ssl_context(config: SecurityConfig) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
    context.check_hostname = config.ssl_check_hostname
    try:
        if config.ssl_cafile:
            context.load_verify_locations(cafile=config.ssl_cafile)
        if config.ssl_certfile:
            context.load_cert_chain(
                config.ssl_certfile, config.ssl_keyfile, password=config.ssl_password
            )
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"Cannot load the TLS files of {config!r}: {exc}") from None
    return context


# -- properties (Kafka's and librdkafka's names) -> SecurityConfig --

SECURITY_CONFIG = (
    ConfigDef(
        "Client security (TLS and SASL of every client and tool; the registry reads them as "
        "kafkastore.<key>, the hourly load as kafka.<key>)"
    )
    .define(
        "security.protocol",
        "string",
        "PLAINTEXT",
        "How to reach the brokers: PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL.",
        validator=one_of(*SECURITY_PROTOCOLS),
    )
    .define(
        "ssl.ca.location",
        "string",
        None,
        "PEM file of the CA certificates that sign the brokers' certificates (unset: the "
        "system's). librdkafka's name.",
        optional=True,
    )
    .define(
        "ssl.truststore.location",
        "string",
        None,
        "The Java client's name for ssl.ca.location (a PEM file here, not a JKS store).",
        optional=True,
    )
    .define(
        "ssl.certificate.location",
        "string",
        None,
        "PEM file of this client's certificate, for brokers that ask for one.",
        optional=True,
    )
    .define(
        "ssl.key.location",
        "string",
        None,
        "PEM file of this client's private key (unset: in the certificate file).",
        optional=True,
    )
    .define("ssl.key.password", "password", None, "Password of the private key.", optional=True)
    .define(
        "ssl.endpoint.identification.algorithm",
        "string",
        "https",
        "https: the broker's certificate must name the host connected to; empty or none: "
        "any host name is accepted (the CA is still checked).",
        validator=one_of("https", "", "none"),
    )
    .define(
        "sasl.mechanism",
        "string",
        None,
        "PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (with a SASL_ security.protocol).",
        optional=True,
        validator=one_of(*SASL_MECHANISMS),
    )
    .define(
        "sasl.mechanisms",
        "string",
        None,
        "librdkafka's name for sasl.mechanism.",
        optional=True,
        validator=one_of(*SASL_MECHANISMS),
    )
    .define("sasl.username", "string", None, "SASL user name (librdkafka's name).", optional=True)
    .define("sasl.password", "password", None, "SASL password (librdkafka's name).", optional=True)
    .define(
        "sasl.jaas.config",
        "password",
        None,
        "The Java client's login: `org.apache.kafka.common.security.plain.PlainLoginModule "
        'required username="u" password="p";` (or scram.ScramLoginModule); gives '
        "sasl.username and sasl.password.",
        optional=True,
    )
)

SECURITY_KEYS = frozenset(SECURITY_CONFIG.keys)

_JAAS = re.compile(
    r"^\s*org\.apache\.kafka\.common\.security\.(plain\.PlainLoginModule|scram\.ScramLoginModule)"
    r"\s+required\s+(?P<options>.*?)\s*;?\s*$",
    re.DOTALL,
)
_JAAS_OPTION = re.compile(r'(\w+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|(\S+?))(?=\s|;|$)')


def parse_jaas_config(text: str) -> tuple[str, str]:
    """(username, password) of a PlainLoginModule or ScramLoginModule JAAS line."""
    match = _JAAS.match(text)
    if not match:
        raise ConfigError(
            "Invalid value for configuration sasl.jaas.config: expected "
            "'org.apache.kafka.common.security.plain.PlainLoginModule required "
            'username="..." password="...";\' (or scram.ScramLoginModule)'
        )
    options = {
        name: re.sub(r"\\(.)", r"\1", quoted) if quoted or not bare else bare
        for name, quoted, bare in _JAAS_OPTION.findall(match["options"])
    }
    if "username" not in options or "password" not in options:
        raise ConfigError(
            "Invalid value for configuration sasl.jaas.config: needs username and password"
        )
    return options["username"], options["password"]


def security_from_settings(settings: Mapping[str, Any]) -> SecurityConfig:
    """SecurityConfig from SECURITY_CONFIG's parsed settings."""
    username, password = settings["sasl.username"], settings["sasl.password"]
    if settings["sasl.jaas.config"]:
        username, password = parse_jaas_config(settings["sasl.jaas.config"])
    return SecurityConfig(
        security_protocol=settings["security.protocol"],
        ssl_cafile=settings["ssl.ca.location"] or settings["ssl.truststore.location"],
        ssl_certfile=settings["ssl.certificate.location"],
        ssl_keyfile=settings["ssl.key.location"],
        ssl_password=settings["ssl.key.password"],
        ssl_check_hostname=settings["ssl.endpoint.identification.algorithm"] == "https",
        sasl_mechanism=settings["sasl.mechanism"] or settings["sasl.mechanisms"],
        sasl_plain_username=username,
        sasl_plain_password=password,
    )


def split_security(
    raw: Mapping[str, Any], prefix: str = ""
) -> tuple[SecurityConfig, dict[str, Any]]:
    """A component's properties -> (its SecurityConfig, the other properties), so each
    component parses only its own keys and the security keys are declared once. With a
    `prefix` the keys are spelled `<prefix><key>` (the registry's `kafkastore.`, the
    load's `kafka.`), and errors name them so."""
    ours = {k[len(prefix) :]: v for k, v in raw.items() if _is_security_key(k, prefix)}
    rest = {k: v for k, v in raw.items() if not _is_security_key(k, prefix)}
    try:
        return security_from_settings(SECURITY_CONFIG.parse(ours)), rest
    except ConfigError as exc:
        if not prefix:
            raise
        raise ConfigError(_with_prefix(str(exc), prefix)) from None


def _is_security_key(key: str, prefix: str) -> bool:
    return key.startswith(prefix) and key[len(prefix) :] in SECURITY_KEYS


def _with_prefix(message: str, prefix: str) -> str:
    """A ConfigError's message with the keys it names spelled as the component does."""
    for key in sorted(SECURITY_KEYS, key=len, reverse=True):
        message = re.sub(rf"(?<![\w.]){re.escape(key)}(?![\w.])", prefix + key, message)
    return message


def command_security(parser: argparse.ArgumentParser, path: str | None) -> SecurityConfig:
    """The security settings of a `--command-config` properties file (None: plaintext).
    Its other keys (Kafka's client.id, request.timeout.ms, ...) have options of their own
    in our tools: accepted and not used. A bad file ends the run through `parser.error`,
    naming the file."""
    if path is None:
        return SecurityConfig()
    try:
        return split_security(load_properties(path))[0]
    except ConfigError as exc:
        parser.error(f"--command-config {path}: {exc}")
