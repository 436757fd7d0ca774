"""What one listener needs to secure its connections, built once at start from the broker
config: its security protocol, the TLS context (SSL, SASL_SSL), the principal mapping of
client certificates, and the SASL mechanisms with where each finds its users (PLAIN: the
`user_<name>` entries of the listener's JAAS config; SCRAM: the broker's Credentials).
"""

from __future__ import annotations

import logging
import ssl
from dataclasses import dataclass

from broker.config.definition import ConfigError
from broker.config.listeners import SASL_PROTOCOLS, TLS_PROTOCOLS
from broker.security.authenticator import SaslAuthenticator, SaslSettings
from broker.security.credentials import Credentials
from broker.security.jaas import JaasConfig, parse_jaas
from broker.security.plain import PlainServer
from broker.security.principal import PrincipalMapper
from broker.security.scram import MECHANISMS, ScramServer
from broker.security.tls import server_context

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ListenerSecurity:
    name: str
    protocol: str
    ssl: ssl.SSLContext | None = None
    principal_mapper: PrincipalMapper | None = None
    sasl: SaslSettings | None = None

    def authenticator(self, session) -> SaslAuthenticator | None:
        return SaslAuthenticator(self.sasl, session) if self.sasl is not None else None


def jaas_config(cfg, listener: str, mechanism: str) -> JaasConfig | None:
    """`listener.name.<listener>.<mechanism>.sasl.jaas.config`, else `sasl.jaas.config`."""
    key = f"{mechanism.lower()}.sasl.jaas.config"
    text = cfg.listener_value(listener, key)
    if not text:
        return None
    try:
        return parse_jaas(text)
    except ValueError as exc:  # the message never quotes the value: it holds passwords
        raise ConfigError(f"Invalid JAAS config for listener {listener} ({key}): {exc}") from None


def listener_security(cfg, listener: str, credentials: Credentials) -> ListenerSecurity:
    protocol = cfg.security_protocol(listener)
    tls = mapper = sasl = None
    if protocol in TLS_PROTOCOLS:

        def value(key: str):
            return cfg.listener_value(listener, key)

        tls = server_context(value)
        mapper = PrincipalMapper(value("ssl.principal.mapping.rules"))
    if protocol in SASL_PROTOCOLS:
        servers = {}
        for mechanism in cfg.listener_value(listener, "sasl.enabled.mechanisms"):
            if mechanism == "PLAIN":
                jaas = jaas_config(cfg, listener, mechanism)
                users = jaas.users() if jaas is not None else {}
                if not users:
                    log.warning(
                        "PLAIN is enabled on listener %s but its JAAS config names no "
                        "user_<name>: every PLAIN authentication will fail",
                        listener,
                    )
                servers[mechanism] = lambda users=users: PlainServer(users.get)
            else:
                mech = MECHANISMS[mechanism]
                servers[mechanism] = lambda mech=mech: ScramServer(
                    mech, lambda user: credentials.scram(user, mech.name)
                )
        sasl = SaslSettings(servers, cfg.listener_value(listener, "connections.max.reauth.ms"))
    return ListenerSecurity(listener, protocol, tls, mapper, sasl)
