"""What every page of the control room shows around its content: the conversation and the nav."""

from __future__ import annotations

import uuid
from typing import Any
from urllib.parse import urlencode

from asgiref.sync import async_to_sync
from django.http import HttpRequest, HttpResponseRedirect
from django.shortcuts import redirect
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django_htmx.middleware import HtmxDetails

from agent.llm import NOT_CONFIGURED_MESSAGE, llm_configured
from controlroom import selectors
from controlroom.selectors import digest_card
from oikos.approvals import approvals_confirmed
from transcript import selectors as transcript_selectors


class HtmxHttpRequest(HttpRequest):
    """A request as django-htmx's middleware leaves it (for type checking)."""

    htmx: HtmxDetails


# The chat drawer on other pages continues the session last used in this browser.
DRAWER_SESSION_KEY = "controlroom_session"


def conversation_context(
    *,
    session_id: uuid.UUID | None,
    place: str,
    text: str = "",
    error: str = "",
    follow_approvals: bool = False,
    follow_sessions: bool = False,
    follow_investigations: bool = False,
    follow_changes: bool = False,
    follow_notes: bool = False,
    follow_schedules: str = "",
    before: uuid.UUID | None = None,
) -> dict[str, Any]:
    """The conversation pane (home or drawer) for `session_id`, or an empty one for a new chat.

    Its socket also carries what else the page shows live: the rail and the session list (home),
    the session list (`follow_sessions`), the approvals page's cards (`follow_approvals`), the
    investigations page's list (`follow_investigations`), the Changes page's list
    (`follow_changes`), the Notes page's list (`follow_notes`), the Schedules page's list or one
    schedule's runs (`follow_schedules`:
    "list", or the schedule's id); on home, the latest digest; and on every page, new investigations. A
    conversation with approval cards asks Oikos about them (see `approvals_confirmed`): call this
    from a thread, never from the event loop.

    A long session shows its latest turns (fewer in the drawer) with a link to the earlier ones;
    `before` (a turn id) shows the turns before that one instead. Such a page of earlier turns is
    history: its socket does not follow the session (whose snapshot would put the latest turns
    back), and the composer gives way to a link back to the latest turns.
    """
    # One read of the session row for the header, the meter and the composer's model.
    head = selectors.session_head(session_id=session_id) if session_id else None
    shown = selectors.DRAWER_TURNS_SHOWN if place == "drawer" else transcript_selectors.SESSION_TURNS_SHOWN
    page = (
        transcript_selectors.session_turns_page(session_id=session_id, before=before, limit=shown)
        if session_id
        else None
    )
    turns = page.turns if page else []
    earlier = page is not None and page.before is not None
    query = {"session": str(session_id)} if session_id and not earlier else {}
    if session_id and place == "drawer":
        # Its socket's snapshot draws as many turns as the page did.
        query["turns"] = str(shown)
    if place == "home":
        query["rail"] = "1"
    if place == "home" or follow_sessions:
        query["sessions"] = "1"
    if follow_approvals:
        query["approvals"] = "1"
    if follow_investigations:
        query["investigations"] = "1"
    if follow_changes:
        query["changes"] = "1"
    if follow_notes:
        query["notes"] = "1"
    if follow_schedules:
        query["schedules"] = follow_schedules
    # A card offers Approve/Deny only for an approval Oikos confirms as pending, on the page as
    # served too (a tab whose socket is down can still decide; a forged card never can).
    cards = [item for turn in turns for item in turn.approvals()]
    approvals = async_to_sync(approvals_confirmed)(cards) if cards else {}
    return {
        "place": place,
        "session_id": str(session_id) if session_id else "",
        "session_title": head.title if head else "",
        "context": head.context if head else None,
        "escalation": _escalation(session_id) if session_id else None,
        "turns": turns,
        "earlier_url": _session_url(session_id, before=page.earlier_than) if page and page.earlier_than else "",
        "latest_url": _session_url(session_id) if earlier else "",
        "running": next((turn for turn in turns if turn.running), None),
        "approvals": approvals,
        "pending_approvals": [approval for approval in approvals.values() if approval.decidable],
        "ws_url": "/ws/ui/?" + urlencode(query),
        "llm_ready": llm_configured(),
        "llm_missing": NOT_CONFIGURED_MESSAGE,
        "budget": selectors.budget_meter() if place == "home" else None,
        "digest": digest_card() if place == "home" else None,
        "composer": {
            "text": text,
            "error": error,
            "autofocus": place == "home",
            **selectors.model_picker(session_id=session_id, chosen=head.model if head else None),
        },
    }


def _escalation(session_id: uuid.UUID) -> selectors.EscalationCard | None:
    card = selectors.session_escalation(session_id=session_id)
    return selectors.escalation_blast_load(card) if card is not None else None


def _session_url(session_id: uuid.UUID | None, *, before: uuid.UUID | None = None) -> str:
    url = reverse("controlroom:session", kwargs={"session_id": session_id})
    return f"{url}?{urlencode({'before': before})}" if before else url


def nav_context(*, current: str = "", query: str = "") -> dict[str, Any]:
    return {"sessions": selectors.sessions_recent(query=query), "current_session": current, "session_query": query}


def redirect_back(request: HttpRequest, fallback: str) -> HttpResponseRedirect:
    """Back to the page the form was on (same host only), for browsers without htmx."""
    back = request.headers.get("referer", "")
    if back and url_has_allowed_host_and_scheme(back, allowed_hosts={request.get_host()}):
        return HttpResponseRedirect(back)
    return redirect(fallback)
