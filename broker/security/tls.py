"""TLS contexts from Kafka-style settings, with Python's `ssl`.

Key store: a PEM file with the private key and its certificate chain
(`ssl.keystore.location`), or both as PEM text (`ssl.keystore.key`,
`ssl.keystore.certificate.chain`, Kafka's inline PEM); `ssl.key.password` when the key is
encrypted. Trust store: a PEM file of CA certificates (`ssl.truststore.location`) or
their text (`ssl.truststore.certificates`). TLS 1.2 and 1.3 only
(`ssl.enabled.protocols`). A bad file or password is a ConfigError naming the key.
"""

from __future__ import annotations

import ssl
import tempfile
from collections.abc import Callable
from pathlib import Path
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
    key, chain = value("ssl.keystore.key"), value("ssl.keystore.certificate.chain")
    if key and chain:
        # ssl wants files: the inline PEM goes to a private temporary one, gone at once.
        with tempfile.TemporaryDirectory(prefix="keystore-") as directory:
            path = Path(directory) / "keystore.pem"
            path.touch(mode=0o600)
            path.write_text(f"{key.strip()}\n{chain.strip()}\n")
            _load_chain(context, str(path), value, "ssl.keystore.key")
        return
    _load_chain(context, value("ssl.keystore.location"), value, "ssl.keystore.location")


def _load_chain(context: ssl.SSLContext, path: str, value: Settings, key: str) -> None:
    try:
        context.load_cert_chain(path, password=value("ssl.key.password"))
    except (OSError, ssl.SSLError) as exc:
        shown = "(inline PEM)" if key == "ssl.keystore.key" else repr(path)
        raise ConfigError(
            f"Invalid value {shown} for configuration {key}: cannot load a private key and "
            f"certificate chain ({exc.__class__.__name__}: "
            f"{getattr(exc, 'reason', None) or exc.strerror or exc})"
        ) from None


def _load_truststore(context: ssl.SSLContext, value: Settings, purpose: ssl.Purpose) -> None:
    location, inline = value("ssl.truststore.location"), value("ssl.truststore.certificates")
    if not location and not inline:
        context.load_default_certs(purpose)
        return
    if inline:
        key, shown = "ssl.truststore.certificates", "(inline PEM)"
    else:
        key, shown = "ssl.truststore.location", repr(location)
    try:
        context.load_verify_locations(cafile=None if inline else location, cadata=inline or None)
    except (OSError, ValueError, ssl.SSLError) as exc:
        raise ConfigError(f"Invalid value {shown} for configuration {key}: {exc}") from None


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
    context.check_hostname = value("ssl.endpoint.identification.algorithm") == "https"
    _versions(context, value("ssl.enabled.protocols"))
    _load_truststore(context, value, ssl.Purpose.SERVER_AUTH)
    _load_keystore(context, value)
    return context
