"""`local` mode beyond loopback: a loud warning, at start-up and at the first such connection.

In `local` mode every connection from the allowed networks acts as the operator, approvals
included. That is right on a laptop and wrong on a server. Django cannot see the socket Daphne
listens on, so start-up reads `HERMES_BIND` (the address given to `daphne -b`); and because that can
be missing or wrong, the ASGI edge also warns once when a connection actually arrives on a local
address that is not loopback.
"""

from __future__ import annotations

import logging
from typing import Any

from access.config import AccessConfig
from access.networks import address_is_loopback

logger = logging.getLogger("access")

_BANNER = "!" * 100
_noted_connection = False


def local_mode_exposure(bind: str | None = None) -> str | None:
    """What is wrong when `local` mode listens on `bind` (default HERMES_BIND); None when nothing is."""
    config = AccessConfig.from_settings()
    if config.auth != "local":
        return None
    address = config.bind if bind is None else bind
    if not address or address_is_loopback(address):
        return None
    return (
        f"HERMES_AUTH=local while Hermes listens on {address}: every connection from "
        f"{', '.join(config.allowed_cidrs)} acts as the operator {config.local_operator!r} "
        "and can approve executions. Use HERMES_AUTH=proxy or django, or listen on 127.0.0.1."
    )


def exposure_warn_at_startup() -> None:
    """Log the warning for HERMES_BIND, if there is one to give (called when the ASGI app is built)."""
    problem = local_mode_exposure()
    if problem:
        _shout(problem)


def exposure_note_connection(scope: dict[str, Any]) -> None:
    """Warn once per process when `local` mode serves a connection that reached a non-loopback address."""
    global _noted_connection
    if _noted_connection or AccessConfig.from_settings().auth != "local":
        return
    server = scope.get("server")
    if not server or not isinstance(server[0], str) or server[1] is None:
        return  # a unix socket: only a local process can reach it
    problem = local_mode_exposure(server[0])
    if problem:
        _noted_connection = True
        _shout(problem)


def _shout(problem: str) -> None:
    logger.warning("\n%s\nSECURITY WARNING: %s\n%s", _BANNER, problem, _BANNER)
