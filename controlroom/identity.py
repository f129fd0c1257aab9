"""Who is at the controls: the one function every view, consumer and decision asks.

Access control is local for now: every request acts as `HERMES_LOCAL_OPERATOR`. Proxy headers or a
Django login will replace the body of `operator_name`; nothing else reads identity.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.conf import settings
from django.http import HttpRequest

TURN_ACTOR_PREFIX = "operator:"


def operator_name(request_or_scope: HttpRequest | Mapping[str, Any]) -> str | None:
    """The operator behind an HTTP request or a websocket scope; None when nobody may act."""
    name = (settings.HERMES_LOCAL_OPERATOR or "").strip()
    return name or None


def turn_actor(operator: str) -> str:
    """The actor recorded on sessions, turns and ledger rows started by `operator`."""
    return f"{TURN_ACTOR_PREFIX}{operator}"
