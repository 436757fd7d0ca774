"""The client's side of SASL as a sans-I/O state machine: requests out, responses in.

    exchange = SaslExchange(security)
    request = exchange.start()                 # (SASL_HANDSHAKE, {"mechanism": ...})
    while request is not None:
        request = exchange.receive(send_and_wait(*request))
    exchange.session_lifetime_ms               # 0: no re-authentication asked for

The exchange is SaslHandshake v1, then the mechanism's tokens inside SaslAuthenticate
(docs/contracts/security.md, "SASL"): PLAIN sends `\\0user\\0password` (an empty
authorization id, as librdkafka) and expects an empty reply; SCRAM-SHA-256/512 run
`ScramClient` (client-first, client-final, then the server's signature is checked, so
a broker that does not know the password is refused too). A refusal raises the
broker's error with its message (SaslAuthenticationFailedError,
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
from broker.security.scram import MECHANISMS, ScramClient, ScramError

Request = tuple[int, dict]


class _Plain:
    def __init__(self, username: str, password: str) -> None:
        self._token = b"\0" + username.encode() + b"\0" + password.encode()

    def first(self) -> bytes:
        return self._token

    def step(self, server: bytes) -> bytes | None:
        if server:
            raise SaslAuthenticationFailedError("PLAIN: the broker answered with a challenge")
        return None


class _Scram:
    def __init__(self, client: ScramClient) -> None:
        self._client = client
        self._sent_final = False

    def first(self) -> bytes:
        return self._client.first_message()

    def step(self, server: bytes) -> bytes | None:
        try:
            if not self._sent_final:
                self._sent_final = True
                return self._client.final_message(server)
            self._client.verify(server)
        except ScramError as exc:
            raise SaslAuthenticationFailedError(f"{self._client.mechanism.name}: {exc}") from None
        return None


class SaslExchange:
    """One authentication (or re-authentication) of one connection."""

    def __init__(self, security: SecurityConfig, nonce: str | None = None) -> None:
        if not security.uses_sasl:
            raise ValueError(f"{security.security_protocol} does not use SASL")
        self.mechanism = security.sasl_mechanism
        user, password = security.sasl_plain_username, security.sasl_plain_password
        if self.mechanism == "PLAIN":
            self._tokens: _Plain | _Scram = _Plain(user, password)
        else:
            self._tokens = _Scram(ScramClient(MECHANISMS[self.mechanism], user, password, nonce))
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
            token = self._tokens.step(bytes(body["auth_bytes"] or b""))
        except SaslAuthenticationFailedError:
            self._state = "failed"
            raise
        if token is not None:
            return self._token(token)
        self._state = "done"
        self.session_lifetime_ms = body.get("session_lifetime_ms", 0)
        return None

    @staticmethod
    def _token(token: bytes) -> Request:
        return SASL_AUTHENTICATE, {"auth_bytes": token}
