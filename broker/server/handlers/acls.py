"""What the ACL APIs' handlers share (the wire's fields: broker/security/acl_wire.py)."""

from __future__ import annotations

from broker.protocol.errors import ErrorCode
from broker.security.acl import AclError


def error_of(exc: Exception | None) -> tuple[ErrorCode, str | None]:
    """A store's outcome as an error code and message (AclError: the request's fault)."""
    if exc is None:
        return ErrorCode.NONE, None
    if isinstance(exc, AclError):
        return ErrorCode.INVALID_REQUEST, str(exc)
    return ErrorCode.UNKNOWN_SERVER_ERROR, f"{type(exc).__name__}: {exc}"


SECURITY_DISABLED_MESSAGE = "No authorizer is configured on the broker (authorizer.class.name)."
