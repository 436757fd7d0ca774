"""Who may use the registry's REST API: HTTP basic authentication against a users file,
and a read-only role.

The users file keeps one user a line, ``name: <password hash>[,role...]`` (``#`` starts a
comment), the shape of the Jetty property file Confluent's registry reads, but only with
salted, iterated hashes (PBKDF2-HMAC-SHA256, ``pbkdf2-sha256$<iterations>$<salt>$<hash>``);
``python -m schemas.registry passwd`` writes the lines. A plain-text password is refused at
start. The file is read again when it changes, so users are added without a restart.

Checking a hash costs a few hundred milliseconds by design; a password once verified is
remembered by its salted SHA-256 for the life of the file, so a client sending the same
credentials on every request pays that once.

Answers follow Confluent's: 401 with ``WWW-Authenticate: Basic realm="..."`` and error code
401 when credentials are missing or wrong; 403 with error code 40301 when the user has none
of the allowed roles, or only a read-only role and the request would change something.
Neither the header nor the password ever reaches a log.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import os
import secrets
import threading
from dataclasses import dataclass
from pathlib import Path

HASH_SCHEME = "pbkdf2-sha256"
DEFAULT_ITERATIONS = 200_000
# Methods that read: a read-only user may send these and nothing else.
READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


class UsersFileError(ValueError):
    """The users file cannot be used; the message names the file and the line."""


def hash_password(password: str, iterations: int = DEFAULT_ITERATIONS) -> str:
    salt = secrets.token_bytes(16)
    digest = hashlib.pbkdf2_hmac("sha256", password.encode(), salt, iterations)
    return "$".join(
        (
            HASH_SCHEME,
            str(iterations),
            base64.b64encode(salt).decode(),
            base64.b64encode(digest).decode(),
        )
    )


def _parse_hash(text: str) -> tuple[int, bytes, bytes]:
    scheme, iterations, salt, digest = text.split("$")
    if scheme != HASH_SCHEME or not iterations.isdigit():
        raise ValueError(text)
    return (
        int(iterations),
        base64.b64decode(salt, validate=True),
        base64.b64decode(digest, validate=True),
    )


def verify_password(stored: str, password: str) -> bool:
    iterations, salt, digest = _parse_hash(stored)
    candidate = hashlib.pbkdf2_hmac("sha256", password.encode(), salt, iterations)
    return hmac.compare_digest(candidate, digest)


@dataclass(frozen=True)
class User:
    name: str
    password_hash: str
    roles: frozenset[str]


def parse_users(text: str, source: str = "users file") -> dict[str, User]:
    users: dict[str, User] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        name, sep, rest = line.partition(":")
        name = name.strip()
        fields = [f.strip() for f in rest.split(",")]
        if not sep or not name or not fields[0]:
            raise UsersFileError(f"{source} line {number}: expected 'name: <hash>[,role...]'")
        try:
            _parse_hash(fields[0])
        except (ValueError, binascii.Error):
            raise UsersFileError(
                f"{source} line {number}: the password of {name!r} is not a "
                f"{HASH_SCHEME} hash (write it with: python -m schemas.registry passwd)"
            ) from None
        if name in users:
            raise UsersFileError(f"{source} line {number}: user {name!r} appears twice")
        users[name] = User(name, fields[0], frozenset(r for r in fields[1:] if r))
    return users


def user_line(
    name: str, password: str, roles: list[str], iterations: int = DEFAULT_ITERATIONS
) -> str:
    if not name or ":" in name or any(c.isspace() for c in name):
        raise ValueError(f"user name {name!r} must be non-empty, without ':' or spaces")
    bad = [r for r in roles if not r or "," in r or "#" in r]
    if bad:
        raise ValueError(f"role names {bad!r} must be non-empty, without ',' or '#'")
    return ",".join([f"{name}: {hash_password(password, iterations)}", *roles])


class Users:
    """The users file, read again when its modification time or size changes."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._stamp: tuple[int, int] | None = None
        self._users: dict[str, User] = {}
        self._verified: dict[str, bytes] = {}
        self._reload()

    def _reload(self) -> None:
        try:
            stat = os.stat(self.path)
        except OSError as exc:
            raise UsersFileError(f"cannot read users file {self.path}: {exc.strerror}") from None
        stamp = (stat.st_mtime_ns, stat.st_size)
        if stamp == self._stamp:
            return
        users = parse_users(self.path.read_text(encoding="utf-8"), str(self.path))
        with self._lock:
            self._users, self._verified, self._stamp = users, {}, stamp

    def authenticate(self, name: str, password: str) -> User | None:
        try:
            self._reload()
        except UsersFileError:
            pass  # a file broken while running: keep serving the users read last
        user = self._users.get(name)
        if user is None:
            return None
        # Remembered as a salted digest of the password, never the password itself.
        key = hashlib.sha256(user.password_hash.encode() + b"\0" + password.encode()).digest()
        if hmac.compare_digest(self._verified.get(name, b""), key):
            return user
        if not verify_password(user.password_hash, password):
            return None
        with self._lock:
            self._verified[name] = key
        return user


@dataclass(frozen=True)
class AuthPolicy:
    users: Users
    realm: str
    # Roles allowed in at all; empty = any authenticated user.
    roles: frozenset[str]
    # Roles that may only read; a user with any role outside this set may also write.
    readonly_roles: frozenset[str]

    def decide(self, method: str, header: str | None) -> tuple[int, str] | None:
        """None to let the request through, else (HTTP status, message)."""
        credentials = _basic_credentials(header)
        if credentials is None:
            return 401, "Unauthorized"
        user = self.users.authenticate(*credentials)
        if user is None:
            return 401, "Unauthorized"
        if self.roles and not user.roles & self.roles:
            return 403, f"User {user.name!r} has none of the roles allowed in"
        if method not in READ_METHODS and user.roles and user.roles <= self.readonly_roles:
            return 403, f"User {user.name!r} is read-only: {method} is not permitted"
        return None


def _basic_credentials(header: str | None) -> tuple[str, str] | None:
    if not header:
        return None
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        decoded = base64.b64decode(token.strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None
    name, sep, password = decoded.partition(":")
    return (name, password) if sep else None


class BasicAuthMiddleware:
    """ASGI middleware: every HTTP request passes `AuthPolicy.decide` first."""

    def __init__(self, app, policy: AuthPolicy) -> None:
        self.app = app
        self.policy = policy

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        header = None
        for key, value in scope.get("headers", ()):
            if key == b"authorization":
                header = value.decode("latin-1")
                break
        refusal = self.policy.decide(scope["method"], header)
        if refusal is None:
            await self.app(scope, receive, send)
            return
        status, message = refusal
        body = json.dumps(
            {"error_code": 401 if status == 401 else 40301, "message": message}
        ).encode()
        headers = [
            (b"content-type", b"application/vnd.schemaregistry.v1+json"),
            (b"content-length", str(len(body)).encode()),
        ]
        if status == 401:
            headers.append((b"www-authenticate", f'Basic realm="{self.policy.realm}"'.encode()))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})
