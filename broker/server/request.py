"""Who is asking: a session per connection and a context per request.

The network layer creates one `Session` when a connection is accepted and hands every
request on it to the dispatcher inside a `RequestContext`. Handlers read the context
(the API version, the client, the listener) and never the socket. What security adds
(the authenticated principal, SASL state) lives on the session, so the handlers of
later features find it in the same place.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from broker.protocol.framing import RequestHeader

ANONYMOUS = "User:ANONYMOUS"

_connection_ids = itertools.count(1)


@dataclass
class Session:
    """One client connection, from accept to close."""

    listener: str = "PLAINTEXT"
    client_host: str = "127.0.0.1"
    client_port: int = 0
    security_protocol: str = "PLAINTEXT"
    # Kafka's principal string; ANONYMOUS until an authenticating listener sets it (the
    # subject of a TLS client certificate, then a SASL authentication).
    principal: str = ANONYMOUS
    connection_id: str = field(default="")
    # A SASL listener's per-connection state machine (broker/security/authenticator.py),
    # which the dispatcher consults before any request; None on other listeners.
    authenticator: Any = None
    # Why the connection must close once the current answer is sent (a failed SASL
    # authentication); None while it stays open.
    closing: str | None = None

    def __post_init__(self) -> None:
        if not self.connection_id:
            # Kafka names a connection by its two ends; a counter keeps ids unique even
            # when a client port is reused.
            self.connection_id = f"{self.listener}-{self.client_host}:{self.client_port}-" + str(
                next(_connection_ids)
            )


class RequestContext(NamedTuple):
    """One request: its header, the session it came on, and when it arrived. Made for
    every request: a tuple, not a frozen dataclass (whose __init__ costs a microsecond)."""

    header: RequestHeader
    session: Session
    received_ms: int

    @property
    def api_key(self) -> int:
        return self.header.api_key

    @property
    def api_version(self) -> int:
        return self.header.api_version

    @property
    def correlation_id(self) -> int:
        return self.header.correlation_id

    @property
    def client_id(self) -> str | None:
        return self.header.client_id
