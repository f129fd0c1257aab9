"""The pages around the chat, each with the chat drawer: sessions and the tool-call ledger."""

from __future__ import annotations

import uuid
from typing import Any
from urllib.parse import urlencode

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from agent.models import Activity
from controlroom import selectors
from controlroom.forms import LedgerFilterForm
from controlroom.identity import operator_name
from controlroom.views.context import DRAWER_SESSION_KEY, conversation_context, nav_context


def drawer_context(
    request: HttpRequest,
    *,
    follow_sessions: bool = False,
    follow_investigations: bool = False,
    follow_changes: bool = False,
    follow_notes: bool = False,
    follow_schedules: str = "",
) -> dict[str, Any]:
    """The chat drawer of a page other than home: the session last used in this browser."""
    try:
        session_id: uuid.UUID | None = uuid.UUID(str(request.session.get(DRAWER_SESSION_KEY)))
    except ValueError:
        session_id = None
    if session_id is not None and not selectors.session_exists(session_id=session_id):
        session_id = None
    return conversation_context(
        session_id=session_id,
        place="drawer",
        follow_sessions=follow_sessions,
        follow_investigations=follow_investigations,
        follow_changes=follow_changes,
        follow_notes=follow_notes,
        follow_schedules=follow_schedules,
    )


def around_page(request: HttpRequest, **follow: Any) -> dict[str, Any]:
    """What a page other than home shows around its content: the operator, the drawer (following
    what `follow` names, see `drawer_context`) and the decision forms of its pending approvals."""
    drawer = drawer_context(request, **follow)
    return {"operator": operator_name(request), "drawer": drawer, "pending_approvals": drawer["pending_approvals"]}


@require_GET
def sessions_page(request: HttpRequest) -> HttpResponse:
    query = request.GET.get("q", "")[:200]
    context = {**around_page(request, follow_sessions=True), **nav_context(query=query)}
    return render(request, "controlroom/sessions.html", context)


@require_GET
def ledger(request: HttpRequest) -> HttpResponse:
    """Every tool call, newest first; filter by turn (correlation id), session, server, tool, state, errors."""
    form = LedgerFilterForm(request.GET)
    filters = selectors.LedgerFilters()
    older: int | None = None
    newer: int | None = None
    if form.is_valid():
        data = form.cleaned_data
        filters = selectors.LedgerFilters(
            turn=data["turn"],
            session=data["session"],
            server=data["server"],
            tool=data["tool"],
            errors_only=data["only_errors"],
            state=data["state"],
        )
        older, newer = data["older"], data["newer"]
    page = selectors.ledger_page(filters=filters, older_than=older, newer_than=newer)
    context = {
        **around_page(request),
        "form": form,
        "filters": filters,
        "page": page,
        "older_url": _ledger_url(filters, older=page.older_than) if page.older_than else "",
        "newer_url": _ledger_url(filters, newer=page.newer_than) if page.newer_than else "",
        "newest_url": _ledger_url(filters),
        "choices": selectors.ledger_choices(),
        "state_choices": [("", "any"), *Activity.State.choices],
    }
    return render(request, "controlroom/ledger.html", context)


def _ledger_url(filters: selectors.LedgerFilters, **cursor: int | None) -> str:
    """The ledger's next or previous page under the same filters."""
    query = {
        "turn": filters.turn or "",
        "session": filters.session or "",
        "server": filters.server,
        "tool": filters.tool,
        "state": filters.state,
        "only_errors": "1" if filters.errors_only else "",
        **cursor,
    }
    return "?" + urlencode({key: value for key, value in query.items() if value})


@require_GET
def budget_meter(request: HttpRequest) -> HttpResponse:
    """The rail's budget meter alone: the page polls it, since spend changes in any process."""
    if operator_name(request) is None:
        return HttpResponse(status=403)
    return render(request, "controlroom/partials/budget_meter.html", {"budget": selectors.budget_meter()})
