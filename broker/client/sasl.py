"""The client's side of SASL as a sans-I/O state machine: requests out, responses in.

    exchange = SaslExchange(security)
    request = exchange.start()                 # (SASL_HANDSHAKE, {"mechanism": ...})
    while request is not None:
        request = exchange.receive(send_and_wait(*request))
    exchange.session_lifetime_ms               # 0: no re-authentication asked for

The exchange is SaslHandshake v1, then the mechanism's tokens inside SaslAuthenticate
(docs/contracts/security.md, "SASL"), the tokens from broker/security/sasl_client.py:
PLAIN sends `\\0user\\0password` (an empty authorization id, as librdkafka);
SCRAM-SHA-256/512 run `ScramClient` (client-first, client-final, then the server's
signature is checked, so a broker that does not know the password is refused too). A
refusal raises the broker's error with its message (SaslAuthenticationFailedError,
UnsupportedSaslMechanismError): authentication errors are never retriable.
"""

from __future__ import annotations

from broker.client.security import SecurityConfig
from broker.protocol.apis import SASL_AUTHENTICATE, SASL_HANDSHAKE
from broker.protocol.errors import (
    ErrorCode,
    IllegalSaslStateError,
    SaslAuthenticationFailedError,
    UnsupportedSaslMechanismError,
    error_for,
)
from broker.security.sasl_client import SaslClient
from broker.security.scram import ScramError

Request = tuple[int, dict]


class SaslExchange:
    """One authentication (or re-authentication) of one connection."""

    def __init__(self, security: SecurityConfig) -> None:
        if not security.uses_sasl:
            raise ValueError(f"{security.security_protocol} does not use SASL")
        self.mechanism = security.sasl_mechanism
        # The mechanism's tokens: the same client half the brokers use with each other.
        self._tokens = SaslClient(
            self.mechanism, security.sasl_plain_username, security.sasl_plain_password
        )
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
