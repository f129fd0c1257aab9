"""What every page of the control room shows around its content: the conversation and the nav."""

from __future__ import annotations

import uuid
from typing import Any
from urllib.parse import urlencode

from django.http import HttpRequest
from django_htmx.middleware import HtmxDetails

from agent.llm import NOT_CONFIGURED_MESSAGE, llm_configured
from agent.models import AgentSession
from controlroom import selectors


class HtmxHttpRequest(HttpRequest):
    """A request as django-htmx's middleware leaves it (for type checking)."""

    htmx: HtmxDetails


# The chat drawer on other pages continues the session last used in this browser.
DRAWER_SESSION_KEY = "controlroom_session"


def conversation_context(
    *, session_id: uuid.UUID | None, place: str, text: str = "", error: str = ""
) -> dict[str, Any]:
    """The conversation pane (home or drawer) for `session_id`, or an empty one for a new chat."""
    turns = selectors.session_turn_views(session_id=session_id) if session_id else []
    session = AgentSession.objects.filter(pk=session_id).only("title").first() if session_id else None
    query = {"session": str(session_id)} if session_id else {}
    if place == "home":
        query["rail"] = "1"
    pending = [item for turn in turns for item in turn.approvals() if item.pending]
    return {
        "place": place,
        "session_id": str(session_id) if session_id else "",
        "session_title": session.title if session else "",
        "turns": turns,
        "running": next((turn for turn in turns if turn.running), None),
        "approvals": {},
        "pending_approvals": pending,
        "ws_url": "/ws/ui/?" + urlencode(query),
        "llm_ready": llm_configured(),
        "llm_missing": NOT_CONFIGURED_MESSAGE,
        "composer": {"text": text, "error": error, "autofocus": place == "home"},
    }


def nav_context(*, current: str = "", query: str = "") -> dict[str, Any]:
    return {"sessions": selectors.sessions_recent(query=query), "current_session": current, "session_query": query}
