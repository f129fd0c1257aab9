"""The pages around the chat, each with the chat drawer: sessions and the tool-call ledger."""

from __future__ import annotations

import uuid
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from agent.models import Activity
from controlroom import selectors
from controlroom.forms import LedgerFilterForm
from controlroom.identity import operator_name
from controlroom.views.context import DRAWER_SESSION_KEY, conversation_context, nav_context


def drawer_context(
    request: HttpRequest, *, follow_sessions: bool = False, follow_investigations: bool = False
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
    )


def around_page(request: HttpRequest, **follow: bool) -> dict[str, Any]:
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
    page_number = 1
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
        page_number = data["page"] or 1
    context = {
        **around_page(request),
        "form": form,
        "filters": filters,
        "page": selectors.ledger_page(filters=filters, page=page_number),
        "choices": selectors.ledger_choices(),
        "state_choices": [("", "any"), *Activity.State.choices],
    }
    return render(request, "controlroom/ledger.html", context)


@require_GET
def budget_meter(request: HttpRequest) -> HttpResponse:
    """The rail's budget meter alone: the page polls it, since spend changes in any process."""
    if operator_name(request) is None:
        return HttpResponse(status=403)
    return render(request, "controlroom/partials/budget_meter.html", {"budget": selectors.budget_meter()})
