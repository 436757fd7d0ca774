"""How this broker connects to other brokers: the inter-broker listener's name and security
protocol, a TLS client context (the peer must chain to the trust store and its
certificate name the host, as Kafka's default `ssl.endpoint.identification.algorithm`;
our own key store is presented for listeners that require client certificates) and, on
SASL listeners, `sasl.mechanism.inter.broker.protocol` with the `username`/`password` of
that listener's JAAS config for the mechanism (Kafka's way of giving a broker its own
credentials).
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass, field

from broker.config.definition import ConfigError
from broker.config.listeners import SASL_PROTOCOLS, TLS_PROTOCOLS
from broker.security.listener import jaas_config
from broker.security.tls import client_context


@dataclass(frozen=True)
class InterBrokerSecurity:
    protocol: str = "PLAINTEXT"
    ssl: ssl.SSLContext | None = None
    mechanism: str | None = None
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    # The listener's name (inter.broker.listener.name): what the endpoints of leaders
    # given by address only (LeaderAndIsr's live leaders) are called.
    listener: str = "PLAINTEXT"

    @property
    def sasl(self) -> bool:
        return self.mechanism is not None


PLAINTEXT = InterBrokerSecurity()


def inter_broker_security(cfg) -> InterBrokerSecurity:
    listener = cfg.inter_broker_listener
    protocol = cfg.security_protocol(listener)
    context = None
    if protocol in TLS_PROTOCOLS:
        context = client_context(lambda key: cfg.listener_value(listener, key))
    if protocol not in SASL_PROTOCOLS:
        return InterBrokerSecurity(protocol, context, listener=listener)
    mechanism = cfg["sasl.mechanism.inter.broker.protocol"]
    jaas = jaas_config(cfg, listener, mechanism)
    if jaas is None or not jaas.username or not jaas.password:
        raise ConfigError(
            f"The inter-broker listener {listener} is {protocol}: its "
            f"listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config (or "
            "sasl.jaas.config) needs username and password for this broker "
            f"(sasl.mechanism.inter.broker.protocol={mechanism})"
        )
    return InterBrokerSecurity(
        protocol, context, mechanism, jaas.username, jaas.password, listener=listener
    )
