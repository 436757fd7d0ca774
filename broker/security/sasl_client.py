"""The client's side of SASL, without I/O, for both of our clients (the client library's
broker/client/connection.py and the brokers' own broker/inter_broker/connection.py).

`SaslClient` is a mechanism's token sequence: `first()` is the first token,
`respond(challenge)` the next (None once the exchange is over and the server's last token
checked). PLAIN sends `\\0user\\0password` (an empty authorization id, as librdkafka);
SCRAM-SHA-256/512 run scram.ScramClient (client-first, client-final, then the server's
signature is checked, so a broker that does not know the password is refused too).

`SaslExchange` wraps the tokens in Kafka's requests, as a state machine: requests out,
response bodies in (docs/contracts/security.md, "SASL"):

    exchange = SaslExchange(mechanism, username, password)
    request = exchange.start()                 # (SASL_HANDSHAKE, {"mechanism": ...})
    while request is not None:
        request = exchange.receive(send_and_wait(*request))
    exchange.session_lifetime_ms               # 0: no re-authentication asked for

SaslHandshake v1 (v0's bare token frames are not spoken), then the tokens inside
SaslAuthenticate; the caller picks the versions. A refusal raises the broker's error with
its message (SaslAuthenticationFailedError, UnsupportedSaslMechanismError):
authentication errors are never retriable.
"""

from __future__ import annotations

from broker.protocol.apis import SASL_AUTHENTICATE, SASL_HANDSHAKE
from broker.protocol.errors import (
    ErrorCode,
    IllegalSaslStateError,
    SaslAuthenticationFailedError,
    UnsupportedSaslMechanismError,
    error_for,
)
from broker.security.scram import MECHANISMS, ScramClient, ScramError

Request = tuple[int, dict]


class SaslClient:
    def __init__(self, mechanism: str, username: str, password: str) -> None:
        self.mechanism = mechanism
        self._plain = f"\0{username}\0{password}".encode() if mechanism == "PLAIN" else None
        self._scram = (
            ScramClient(MECHANISMS[mechanism], username, password)
            if mechanism in MECHANISMS
            else None
        )
        if self._plain is None and self._scram is None:
            raise ValueError(f"unsupported SASL mechanism {mechanism!r}")
        self._step = 0

    def first(self) -> bytes:
        self._step = 1
        return self._plain if self._plain is not None else self._scram.first_message()

    def respond(self, challenge: bytes) -> bytes | None:
        """The next token, or None when done; ScramError when the server's answer is wrong."""
        step, self._step = self._step, self._step + 1
        if self._plain is not None:
            return None  # PLAIN's success is an empty answer
        if step == 1:
            return self._scram.final_message(challenge)
        if step == 2:
            self._scram.verify(challenge)
            return None
        raise ScramError("the SCRAM exchange is already over")


class SaslExchange:
    """One authentication (or re-authentication) of one connection."""

    def __init__(self, mechanism: str, username: str, password: str) -> None:
        self.mechanism = mechanism
        self._tokens = SaslClient(mechanism, username, password)
        self._state = "new"
        self.session_lifetime_ms = 0

    @property
    def complete(self) -> bool:
        return self._state == "done"

    def start(self) -> Request:
        if self._state != "new":
            raise IllegalSaslStateError("the exchange has started already")
        self._state = "handshake"
        return SASL_HANDSHAKE, {"mechanism": self.mechanism}

    def receive(self, body: dict) -> Request | None:
        """The answer to the last request -> the next request, None once authenticated."""
        if self._state == "handshake":
            return self._handshake(body)
        if self._state == "authenticate":
            return self._authenticate(body)
        raise IllegalSaslStateError(f"no answer is expected in state {self._state}")

    def _handshake(self, body: dict) -> Request:
        enabled = list(body.get("mechanisms") or [])
        code = body["error_code"]
        if code == ErrorCode.UNSUPPORTED_SASL_MECHANISM or (
            code == ErrorCode.NONE and self.mechanism not in enabled
        ):
            self._state = "failed"
            raise UnsupportedSaslMechanismError(
                f"the broker does not enable {self.mechanism} (enabled: "
                f"{', '.join(enabled) or 'none'})"
            )
        if code != ErrorCode.NONE:
            self._state = "failed"
            raise error_for(code, f"SaslHandshake for {self.mechanism}")
        self._state = "authenticate"
        return self._token(self._tokens.first())

    def _authenticate(self, body: dict) -> Request | None:
        if body["error_code"] != ErrorCode.NONE:
            self._state = "failed"
            raise error_for(body["error_code"], body.get("error_message") or self.mechanism)
        try:
            token = self._tokens.respond(bytes(body["auth_bytes"] or b""))
        except ScramError as exc:
            self._state = "failed"
            raise SaslAuthenticationFailedError(f"{self.mechanism}: {exc}") from None
        if token is not None:
            return self._token(token)
        self._state = "done"
        self.session_lifetime_ms = body.get("session_lifetime_ms", 0)
        return None

    @staticmethod
    def _token(token: bytes) -> Request:
        return SASL_AUTHENTICATE, {"auth_bytes": token}
