"""SCRAM (RFC 5802, with RFC 7677's SHA-256 and Kafka's SHA-512): credentials as Kafka
stores them, and both halves of the exchange as sans-I/O state machines.

The broker's SASL server runs `ScramServer` on the bytes of SaslAuthenticate; our client
library runs `ScramClient`; the credential tools store `ScramCredential.to_config()`
strings (docs/contracts/security.md, "SASL"). Nothing here touches a socket, a file or
ZooKeeper, so the exchange is tested by pushing messages through it.

What we accept, as Kafka does: no channel binding (gs2 header `n,,` or `y,,`; `p=` is
refused), an authorization id only when it equals the user name, SCRAM extensions after
the nonce ignored except `tokenauth` (delegation tokens are not served). A failure says
"invalid credentials" whether the user is unknown or the proof is wrong, so a client
cannot probe which user names exist.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from collections.abc import Callable
from dataclasses import dataclass

DEFAULT_ITERATIONS = 4096
# AlterUserScramCredentials refuses more (Kafka's limit), clients refuse servers asking more
# than MAX_CLIENT_ITERATIONS (librdkafka and kafka-python stop at a million).
MAX_ITERATIONS = 16384
MAX_CLIENT_ITERATIONS = 1_000_000


@dataclass(frozen=True)
class Mechanism:
    name: str
    hash_name: str
    # The ScramMechanism code of AlterUserScramCredentials/DescribeUserScramCredentials.
    type_code: int
    min_iterations: int = DEFAULT_ITERATIONS

    def digest(self, data: bytes) -> bytes:
        return hashlib.new(self.hash_name, data).digest()

    def hmac(self, key: bytes, data: bytes) -> bytes:
        return hmac.new(key, data, self.hash_name).digest()


MECHANISMS: dict[str, Mechanism] = {
    m.name: m
    for m in (
        Mechanism("SCRAM-SHA-256", "sha256", 1),
        Mechanism("SCRAM-SHA-512", "sha512", 2),
    )
}
MECHANISMS_BY_CODE: dict[int, Mechanism] = {m.type_code: m for m in MECHANISMS.values()}


class ScramError(Exception):
    """The exchange failed; the message is safe to send to the client."""


def mechanism(name: str) -> Mechanism:
    try:
        return MECHANISMS[name]
    except KeyError:
        raise ScramError(f"unsupported SCRAM mechanism {name!r}") from None


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(text: str, what: str) -> bytes:
    try:
        return base64.b64decode(text.encode("ascii"), validate=True)
    except (ValueError, UnicodeEncodeError):
        raise ScramError(f"invalid base64 in {what}") from None


@dataclass(frozen=True)
class ScramCredential:
    """What the server keeps for one user and mechanism: never the password."""

    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def to_config(self) -> str:
        """Kafka's stored form: `salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=<n>`."""
        return (
            f"salt={_b64(self.salt)},stored_key={_b64(self.stored_key)},"
            f"server_key={_b64(self.server_key)},iterations={self.iterations}"
        )

    @classmethod
    def from_config(cls, text: str) -> ScramCredential:
        fields = dict(item.split("=", 1) for item in text.split(",") if "=" in item)
        try:
            return cls(
                _unb64(fields["salt"], "salt"),
                _unb64(fields["stored_key"], "stored_key"),
                _unb64(fields["server_key"], "server_key"),
                int(fields["iterations"]),
            )
        except (KeyError, ValueError) as exc:
            raise ScramError(f"malformed SCRAM credential: {exc}") from None


def salted_password(mech: Mechanism, password: str, salt: bytes, iterations: int) -> bytes:
    """RFC 5802's Hi(): PBKDF2 with the mechanism's HMAC (SASLprep is not applied, as Kafka)."""
    return hashlib.pbkdf2_hmac(mech.hash_name, password.encode("utf-8"), salt, iterations)


def credential_from_salted(
    mech: Mechanism, salted: bytes, salt: bytes, iterations: int
) -> ScramCredential:
    """AlterUserScramCredentials carries the salted password; the server keeps the keys."""
    client_key = mech.hmac(salted, b"Client Key")
    return ScramCredential(
        salt, mech.digest(client_key), mech.hmac(salted, b"Server Key"), iterations
    )


def make_credential(
    mech: Mechanism, password: str, *, salt: bytes | None = None, iterations: int | None = None
) -> ScramCredential:
    iterations = iterations or mech.min_iterations
    if not mech.min_iterations <= iterations <= MAX_ITERATIONS:
        raise ScramError(
            f"iterations must be between {mech.min_iterations} and {MAX_ITERATIONS} "
            f"for {mech.name}, got {iterations}"
        )
    salt = salt if salt is not None else secrets.token_bytes(32)
    return credential_from_salted(
        mech, salted_password(mech, password, salt, iterations), salt, iterations
    )


def new_nonce() -> str:
    # printable, and never a comma (RFC 5802's nonce alphabet)
    return secrets.token_urlsafe(24)


def escape_name(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")


def unescape_name(name: str) -> str:
    if "=" in name.replace("=2C", "").replace("=3D", ""):
        raise ScramError("invalid user name encoding")
    return name.replace("=2C", ",").replace("=3D", "=")


def _attributes(message: str, what: str) -> list[tuple[str, str]]:
    pairs = []
    for item in message.split(","):
        key, sep, value = item.partition("=")
        if not sep or len(key) != 1:
            raise ScramError(f"malformed {what}")
        pairs.append((key, value))
    return pairs


def _text(message: bytes, what: str) -> str:
    try:
        return message.decode("utf-8")
    except UnicodeDecodeError:
        raise ScramError(f"{what} is not UTF-8") from None


def _xor(a: bytes, b: bytes) -> bytes:
    return bytes(x ^ y for x, y in zip(a, b, strict=True))


INVALID_CREDENTIALS = "Authentication failed: invalid credentials"


class ScramServer:
    """The server's half: `receive(client_first)` -> server-first, `receive(client_final)`
    -> server-final, then `complete` and `username`. Any ScramError ends the exchange."""

    def __init__(
        self,
        mech: Mechanism,
        lookup: Callable[[str], ScramCredential | None],
        nonce: str | None = None,
    ) -> None:
        self.mechanism = mech
        self._lookup = lookup
        self._server_nonce = nonce or new_nonce()
        self._state = "first"
        self.username: str | None = None
        self._credential: ScramCredential | None = None
        self._gs2_header = ""
        self._client_first_bare = ""
        self._server_first = ""
        self._client_nonce = ""
        self._nonce = ""

    @property
    def complete(self) -> bool:
        return self._state == "done"

    def receive(self, message: bytes) -> bytes:
        try:
            if self._state == "first":
                return self._first(_text(message, "client-first message"))
            if self._state == "final":
                return self._final(_text(message, "client-final message"))
            raise ScramError("the SCRAM exchange is already over")
        except ScramError:
            self._state = "failed"
            raise

    def _first(self, text: str) -> bytes:
        cbind, sep1, rest = text.partition(",")
        authzid, sep2, bare = rest.partition(",")
        if not (sep1 and sep2):
            raise ScramError("malformed client-first message")
        if cbind.startswith("p="):
            raise ScramError("channel binding is not supported")
        if cbind not in ("n", "y"):
            raise ScramError("malformed client-first message")
        attrs = _attributes(bare, "client-first message")
        if len(attrs) < 2 or attrs[0][0] != "n" or attrs[1][0] != "r" or not attrs[1][1]:
            raise ScramError("malformed client-first message")
        username = unescape_name(attrs[0][1])
        if authzid and authzid != f"a={escape_name(username)}":
            raise ScramError(
                "Authentication failed: an authorization id different from the user name"
            )
        if any(key == "t" or value.startswith("tokenauth") for key, value in attrs[2:]):
            raise ScramError("delegation tokens are not supported")
        credential = self._lookup(username)
        if credential is None:
            raise ScramError(INVALID_CREDENTIALS)
        self.username, self._credential = username, credential
        self._gs2_header = f"{cbind},{authzid},"
        self._client_first_bare = bare
        self._client_nonce = attrs[1][1]
        self._nonce = self._client_nonce + self._server_nonce
        self._server_first = f"r={self._nonce},s={_b64(credential.salt)},i={credential.iterations}"
        self._state = "final"
        return self._server_first.encode()

    def _final(self, text: str) -> bytes:
        without_proof, sep, proof_attr = text.rpartition(",p=")
        if not sep:
            raise ScramError("malformed client-final message")
        attrs = dict(_attributes(without_proof, "client-final message"))
        if attrs.get("c") != _b64(self._gs2_header.encode()):
            raise ScramError("invalid channel binding")
        if attrs.get("r") not in (self._nonce, self._client_nonce + self._nonce):
            # librdkafka before 2.6.1 (kcat's bundled 2.0.2 among them) sends its own nonce
            # again in front of the combined one; Kafka up to 3.9 accepts that (its check
            # is a suffix match), so we accept that exact form and nothing looser.
            raise ScramError("invalid nonce")
        proof = _unb64(proof_attr, "proof")
        credential = self._credential
        mech = self.mechanism
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        signature = mech.hmac(credential.stored_key, auth_message)
        if len(proof) != len(signature) or not hmac.compare_digest(
            mech.digest(_xor(proof, signature)), credential.stored_key
        ):
            raise ScramError(INVALID_CREDENTIALS)
        self._state = "done"
        return f"v={_b64(mech.hmac(credential.server_key, auth_message))}".encode()


class ScramClient:
    """The client's half: `first_message()`, `final_message(server_first)`,
    `verify(server_final)` (raises ScramError when the server did not know the password)."""

    def __init__(
        self, mech: Mechanism, username: str, password: str, nonce: str | None = None
    ) -> None:
        self.mechanism = mech
        self._password = password
        self._nonce = nonce or new_nonce()
        self._client_first_bare = f"n={escape_name(username)},r={self._nonce}"
        self._server_signature = b""

    def first_message(self) -> bytes:
        return f"n,,{self._client_first_bare}".encode()

    def final_message(self, server_first: bytes) -> bytes:
        text = _text(server_first, "server-first message")
        attrs = _attributes(text, "server-first message")
        fields = dict(attrs)
        if "m" in fields:
            raise ScramError("the server asks for a SCRAM extension we do not know")
        nonce, salt_text, iterations_text = fields.get("r"), fields.get("s"), fields.get("i")
        if not nonce or salt_text is None or iterations_text is None:
            raise ScramError("malformed server-first message")
        if not nonce.startswith(self._nonce) or nonce == self._nonce:
            raise ScramError("the server's nonce does not extend ours")
        if not iterations_text.isdigit():
            raise ScramError("malformed iteration count")
        iterations = int(iterations_text)
        if not self.mechanism.min_iterations <= iterations <= MAX_CLIENT_ITERATIONS:
            raise ScramError(f"refusing {iterations} iterations")
        mech = self.mechanism
        salted = salted_password(mech, self._password, _unb64(salt_text, "salt"), iterations)
        client_key = mech.hmac(salted, b"Client Key")
        without_proof = f"c=biws,r={nonce}"
        auth_message = f"{self._client_first_bare},{text},{without_proof}".encode()
        signature = mech.hmac(mech.digest(client_key), auth_message)
        self._server_signature = mech.hmac(mech.hmac(salted, b"Server Key"), auth_message)
        return f"{without_proof},p={_b64(_xor(client_key, signature))}".encode()

    def verify(self, server_final: bytes) -> None:
        text = _text(server_final, "server-final message")
        fields = dict(_attributes(text, "server-final message"))
        if "e" in fields:
            raise ScramError(f"the server refused: {fields['e']}")
        signature = _unb64(fields.get("v", ""), "server signature")
        if not hmac.compare_digest(signature, self._server_signature):
            raise ScramError("the server's signature is wrong: it does not know the password")
