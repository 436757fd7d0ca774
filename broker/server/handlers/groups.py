"""What the group APIs' handlers share: the coordinator, and the client host it records."""

from __future__ import annotations

from broker.protocol.errors import ErrorCode
from broker.server.context import BrokerContext
from broker.server.request import RequestContext


def coordinator_or_error(ctx: BrokerContext):
    """The broker's group coordinator, or COORDINATOR_NOT_AVAILABLE without one."""
    return ctx.groups if ctx.groups is not None else ErrorCode.COORDINATOR_NOT_AVAILABLE


def group_client_host(request: RequestContext) -> str:
    # Kafka shows the host as Java prints an address ("/127.0.0.1"); tools expect that.
    return f"/{request.session.client_host}"
