"""The client's half of a SASL exchange, without I/O: `first()` is the first token,
`respond(challenge)` the next (None once the exchange is over and the server's last token
checked). PLAIN is one token; SCRAM three steps through scram.ScramClient. Used by the
broker's inter-broker client (broker/inter_broker/connection.py).
"""

from __future__ import annotations

from broker.security.scram import MECHANISMS, ScramClient, ScramError


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
