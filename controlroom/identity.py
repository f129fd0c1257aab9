"""Who is at the controls: the one function every view, consumer and decision asks.

The access middleware decides who a connection is before any view or consumer runs (`access`:
`HERMES_AUTH` local, proxy or django) and refuses connections without an operator; this reads what
it found, for an HTTP request (`request.operator`) or a websocket scope (`scope["operator"]`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.http import HttpRequest

from access.identity import operator_identity

TURN_ACTOR_PREFIX = "operator:"


def operator_name(request_or_scope: HttpRequest | Mapping[str, Any]) -> str | None:
    """The operator behind an HTTP request or a websocket scope; None when nobody may act."""
    identity = operator_identity(request_or_scope)
    return identity.username if identity is not None else None


def turn_actor(operator: str) -> str:
    """The actor recorded on sessions, turns and ledger rows started by `operator`."""
    return f"{TURN_ACTOR_PREFIX}{operator}"
