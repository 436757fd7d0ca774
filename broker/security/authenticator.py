"""The SASL authentication of one connection, as a state machine table (sans-I/O).

The dispatcher asks `admit(api_key)` before decoding any request of a connection on a SASL
listener, and hands every frame to `raw_token` while the client speaks SaslHandshake v0's
bare tokens; the SaslHandshake and SaslAuthenticate handlers call `handshake` and
`authenticate`. Nothing here touches a socket: tests push frames through it.

    state            admits                        event          -> state
    HANDSHAKE        ApiVersions, SaslHandshake    handshake v0   -> RAW_TOKENS
                                                   handshake v1   -> AUTHENTICATE
    RAW_TOKENS       bare tokens (no header)       challenge      -> RAW_TOKENS
                                                   success        -> AUTHENTICATED
    AUTHENTICATE     SaslAuthenticate              challenge      -> AUTHENTICATE
                                                   success        -> AUTHENTICATED
    AUTHENTICATED    every API                     handshake v1   -> REAUTHENTICATE
    REAUTHENTICATE   SaslAuthenticate              challenge      -> REAUTHENTICATE
                                                   success        -> AUTHENTICATED
    any              --                            failure        -> FAILED (then closed)

Anything a state does not admit closes the connection, as Kafka does. A failure answers
(SaslHandshake: UNSUPPORTED_SASL_MECHANISM with the enabled list; SaslAuthenticate:
SASL_AUTHENTICATION_FAILED with a message) and then closes; after bare tokens there is no
way to answer, so the connection just closes.

Re-authentication (KIP-368): with `connections.max.reauth.ms` set, a successful
SaslAuthenticate v1+ tells the client its session lifetime; the client re-authenticates on
the same connection with the same mechanism and principal before it ends. A connection
past its lifetime is closed at its next request other than SaslHandshake.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

from broker.protocol.apis import API_BY_KEY, API_VERSIONS, SASL_AUTHENTICATE, SASL_HANDSHAKE
from broker.protocol.errors import ErrorCode
from broker.security.plain import PlainError
from broker.security.scram import ScramError

USER = "User:"
MECHANISM_ERRORS = (ScramError, PlainError)


class MechanismServer(Protocol):
    """What a mechanism's server half offers (scram.ScramServer, plain.PlainServer)."""

    username: str | None

    @property
    def complete(self) -> bool: ...

    def receive(self, message: bytes) -> bytes: ...


@dataclass(frozen=True)
class SaslSettings:
    """One listener's SASL: the mechanisms offered, in order, each with a factory of its
    server half, and the session lifetime (0: none)."""

    servers: Mapping[str, Callable[[], MechanismServer]]
    reauth_ms: int = 0

    @property
    def mechanisms(self) -> list[str]:
        return list(self.servers)


class State(enum.Enum):
    HANDSHAKE = "handshake"
    RAW_TOKENS = "raw tokens"
    AUTHENTICATE = "authenticate"
    AUTHENTICATED = "authenticated"
    REAUTHENTICATE = "reauthenticate"
    FAILED = "failed"


class Event(enum.Enum):
    HANDSHAKE_V0 = "handshake v0"
    HANDSHAKE_V1 = "handshake v1"
    CHALLENGE = "challenge"
    SUCCESS = "success"


ALL_APIS = None
# What each state lets through the dispatcher (None: everything).
ADMITS: dict[State, frozenset[int] | None] = {
    State.HANDSHAKE: frozenset({API_VERSIONS, SASL_HANDSHAKE}),
    State.RAW_TOKENS: frozenset(),
    State.AUTHENTICATE: frozenset({SASL_AUTHENTICATE}),
    State.AUTHENTICATED: ALL_APIS,
    State.REAUTHENTICATE: frozenset({SASL_AUTHENTICATE}),
    State.FAILED: frozenset(),
}
TRANSITIONS: dict[tuple[State, Event], State] = {
    (State.HANDSHAKE, Event.HANDSHAKE_V0): State.RAW_TOKENS,
    (State.HANDSHAKE, Event.HANDSHAKE_V1): State.AUTHENTICATE,
    (State.RAW_TOKENS, Event.CHALLENGE): State.RAW_TOKENS,
    (State.RAW_TOKENS, Event.SUCCESS): State.AUTHENTICATED,
    (State.AUTHENTICATE, Event.CHALLENGE): State.AUTHENTICATE,
    (State.AUTHENTICATE, Event.SUCCESS): State.AUTHENTICATED,
    (State.AUTHENTICATED, Event.HANDSHAKE_V1): State.REAUTHENTICATE,
    (State.REAUTHENTICATE, Event.CHALLENGE): State.REAUTHENTICATE,
    (State.REAUTHENTICATE, Event.SUCCESS): State.AUTHENTICATED,
}

_SIZE = struct.Struct(">i")


class AuthenticationFailed(Exception):
    """The connection must close (after answering, where the framing allows)."""


@dataclass(frozen=True)
class HandshakeAnswer:
    error_code: ErrorCode
    mechanisms: list[str]


@dataclass(frozen=True)
class AuthenticateAnswer:
    error_code: ErrorCode
    error_message: str | None
    auth_bytes: bytes
    session_lifetime_ms: int


class SaslAuthenticator:
    """One connection's SASL state; sets `session.principal` once authenticated and
    `session.closing` when the connection must end after the current answer."""

    def __init__(self, settings: SaslSettings, session) -> None:
        self.settings = settings
        self.session = session
        self.state = State.HANDSHAKE
        self.mechanism: str | None = None
        self.expires_ms: int | None = None
        self._server: MechanismServer | None = None

    @property
    def authenticated(self) -> bool:
        return self.state is State.AUTHENTICATED

    @property
    def failed(self) -> bool:
        return self.state is State.FAILED

    @property
    def expects_raw_tokens(self) -> bool:
        return self.state is State.RAW_TOKENS

    def admit(self, api_key: int, now_ms: int) -> str | None:
        """None when the request may be handled; else why the connection closes."""
        admitted = ADMITS[self.state]
        if admitted is not ALL_APIS and api_key not in admitted:
            api = API_BY_KEY.get(api_key)
            name = api.name if api is not None else f"API {api_key}"
            return f"{name} is not allowed in SASL state {self.state.value}"
        if (
            self.state is State.AUTHENTICATED
            and self.expires_ms is not None
            and now_ms >= self.expires_ms
            and api_key != SASL_HANDSHAKE
        ):
            self._fail("the SASL session expired without re-authentication")
            return self.session.closing
        return None

    # -- SaslHandshake -------------------------------------------------------------------
    def handshake(self, mechanism: str, version: int) -> HandshakeAnswer:
        event = Event.HANDSHAKE_V0 if version == 0 else Event.HANDSHAKE_V1
        enabled = self.settings.mechanisms
        if (self.state, event) not in TRANSITIONS:
            self._fail(f"SaslHandshake v{version} in SASL state {self.state.value}")
            return HandshakeAnswer(ErrorCode.ILLEGAL_SASL_STATE, enabled)
        if mechanism not in enabled:
            self._fail(f"unsupported SASL mechanism {mechanism!r}")
            return HandshakeAnswer(ErrorCode.UNSUPPORTED_SASL_MECHANISM, enabled)
        if self.state is State.AUTHENTICATED and mechanism != self.mechanism:
            self._fail(f"re-authentication changed the SASL mechanism to {mechanism}")
            return HandshakeAnswer(ErrorCode.UNSUPPORTED_SASL_MECHANISM, [self.mechanism])
        self.mechanism = mechanism
        self._server = self.settings.servers[mechanism]()
        self._move(event)
        return HandshakeAnswer(ErrorCode.NONE, enabled)

    # -- SaslAuthenticate (v1 handshake) -------------------------------------------------
    def authenticate(self, token: bytes, version: int, now_ms: int) -> AuthenticateAnswer:
        if self.state not in (State.AUTHENTICATE, State.REAUTHENTICATE):
            self._fail(f"SaslAuthenticate in SASL state {self.state.value}")
            return AuthenticateAnswer(
                ErrorCode.ILLEGAL_SASL_STATE,
                f"SaslAuthenticate is not expected in SASL state {self.state.value}",
                b"",
                0,
            )
        try:
            challenge = self._evaluate(token, now_ms)
        except AuthenticationFailed as exc:
            return AuthenticateAnswer(ErrorCode.SASL_AUTHENTICATION_FAILED, str(exc), b"", 0)
        lifetime = self.settings.reauth_ms if self.authenticated and version >= 1 else 0
        return AuthenticateAnswer(ErrorCode.NONE, None, challenge, lifetime)

    # -- bare tokens (v0 handshake) ------------------------------------------------------
    def raw_token(self, frame: bytes, now_ms: int) -> bytes:
        """The size-prefixed answer to a bare token; AuthenticationFailed closes."""
        return _SIZE.pack(len(answer := self._evaluate(frame, now_ms))) + answer

    def _evaluate(self, token: bytes, now_ms: int) -> bytes:
        try:
            challenge = self._server.receive(token)
        except MECHANISM_ERRORS as exc:
            self._fail(f"{self.mechanism} authentication failed: {exc}")
            raise AuthenticationFailed(str(exc)) from None
        if not self._server.complete:
            self._move(Event.CHALLENGE)
            return challenge
        principal = USER + self._server.username
        if self.state is State.REAUTHENTICATE and principal != self.session.principal:
            message = "Authentication failed: re-authentication as a different principal"
            self._fail(message)
            raise AuthenticationFailed(message)
        self.session.principal = principal
        reauth = self.settings.reauth_ms
        self.expires_ms = now_ms + reauth if reauth else None
        self._server = None
        self._move(Event.SUCCESS)
        return challenge

    def _move(self, event: Event) -> None:
        self.state = TRANSITIONS[(self.state, event)]

    def _fail(self, reason: str) -> None:
        self.state = State.FAILED
        self._server = None
        self.session.closing = reason
