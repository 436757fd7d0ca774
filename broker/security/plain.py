"""SASL PLAIN (RFC 4616), the server's half: one message `authzid \\0 user \\0 password`.

librdkafka sends an empty authorization id, kafka-python the user name; any other
authorization id is refused, as Kafka does. Success is answered with empty bytes. The
failure message is the same for an unknown user and a wrong password.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable

INVALID = "Authentication failed: Invalid username or password"


class PlainError(Exception):
    """The exchange failed; the message is safe to send to the client."""


class PlainServer:
    """`receive(message)` -> b"" once, then `complete` and `username`. The same face as
    scram.ScramServer, so the authenticator drives both alike."""

    def __init__(self, password_of: Callable[[str], str | None]) -> None:
        self._password_of = password_of
        self.username: str | None = None
        self.complete = False

    def receive(self, message: bytes) -> bytes:
        if self.complete:
            raise PlainError("the PLAIN exchange is already over")
        try:
            authzid, user, password = message.decode("utf-8").split("\0")
        except (UnicodeDecodeError, ValueError):
            raise PlainError("Authentication failed: malformed PLAIN message") from None
        if not user or not password:
            raise PlainError(INVALID)
        if authzid and authzid != user:
            raise PlainError("Authentication failed: an authorization id other than the user")
        expected = self._password_of(user)
        # compare_digest on every path: the time does not tell whether the user exists.
        given, known = password.encode(), (expected or "\0").encode()
        if not hmac.compare_digest(given, known) or expected is None:
            raise PlainError(INVALID)
        self.username, self.complete = user, True
        return b""
