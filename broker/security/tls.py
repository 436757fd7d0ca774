"""TLS contexts from Kafka-style settings, with Python's `ssl`.

Key store: a PEM file with the private key and its certificate chain
(`ssl.keystore.location`, `ssl.key.password` when the key is encrypted). Trust store: a
PEM file of CA certificates (`ssl.truststore.location`). TLS 1.2 and 1.3 only
(`ssl.enabled.protocols`). A bad file or password is a ConfigError naming the key.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable
from typing import Any

from broker.config.definition import ConfigError

CLIENT_AUTH = {
    "none": ssl.CERT_NONE,
    "requested": ssl.CERT_OPTIONAL,
    "required": ssl.CERT_REQUIRED,
}
_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
# How long a client may take over its TLS handshake before its connection is dropped
# (Kafka bounds it with the connection's idle time; asyncio needs a figure).
HANDSHAKE_TIMEOUT_S = 10.0

# value(key) -> the setting for this listener (its override, else the broker's).
Settings = Callable[[str], Any]


def _versions(context: ssl.SSLContext, enabled: list[str]) -> None:
    chosen = sorted(_VERSIONS[v] for v in enabled)
    context.minimum_version, context.maximum_version = chosen[0], chosen[-1]


def _load_keystore(context: ssl.SSLContext, value: Settings) -> None:
    location = value("ssl.keystore.location")
    try:
        context.load_cert_chain(location, password=value("ssl.key.password"))
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(
            f"Invalid value {location!r} for configuration ssl.keystore.location: "
            f"cannot load a private key and certificate chain ({exc.__class__.__name__}: "
            f"{getattr(exc, 'reason', None) or exc.strerror or exc})"
        ) from None


def _load_truststore(context: ssl.SSLContext, value: Settings, purpose: ssl.Purpose) -> None:
    location = value("ssl.truststore.location")
    if not location:
        context.load_default_certs(purpose)
        return
    try:
        context.load_verify_locations(cafile=location)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(
            f"Invalid value {location!r} for configuration ssl.truststore.location: {exc}"
        ) from None


def server_context(value: Settings) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _versions(context, value("ssl.enabled.protocols"))
    _load_keystore(context, value)
    context.verify_mode = CLIENT_AUTH[value("ssl.client.auth")]
    if context.verify_mode != ssl.CERT_NONE:
        _load_truststore(context, value, ssl.Purpose.CLIENT_AUTH)
    return context


def client_context(value: Settings) -> ssl.SSLContext:
    """What this broker uses to reach another broker's TLS listener: the peer must chain to
    the trust store and its certificate name the host; this broker's own certificate is
    presented too (a listener with `ssl.client.auth=required` asks for it)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    _versions(context, value("ssl.enabled.protocols"))
    _load_truststore(context, value, ssl.Purpose.SERVER_AUTH)
    _load_keystore(context, value)
    return context
