"""The API handlers: one module per Kafka API, each declaring `HANDLER` (see base.py).

Found by walking this package, so the list of served APIs is written nowhere else.
"""

from __future__ import annotations

import importlib
import pkgutil

from broker.server.handlers.base import ApiHandler


def _discover() -> dict[int, ApiHandler]:
    found: dict[int, ApiHandler] = {}
    for module in pkgutil.iter_modules(__path__):
        handler = getattr(importlib.import_module(f"{__name__}.{module.name}"), "HANDLER", None)
        if handler is None:
            continue
        if handler.key in found:
            raise RuntimeError(f"two handlers for API {handler.api.name}")
        found[handler.key] = handler
    return dict(sorted(found.items()))


HANDLERS: dict[int, ApiHandler] = _discover()


def advertised_ranges() -> dict[int, tuple[int, int]]:
    """What ApiVersions lists: every API with a handler, at its declared range."""
    return {key: handler.advertised for key, handler in HANDLERS.items()}
