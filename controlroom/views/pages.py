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


def drawer_context(request: HttpRequest, *, follow_sessions: bool = False) -> dict[str, Any]:
    try:
        session_id: uuid.UUID | None = uuid.UUID(str(request.session.get(DRAWER_SESSION_KEY)))
    except ValueError:
        session_id = None
    if session_id is not None and not selectors.session_exists(session_id=session_id):
        session_id = None
    return conversation_context(session_id=session_id, place="drawer", follow_sessions=follow_sessions)


@require_GET
def sessions_page(request: HttpRequest) -> HttpResponse:
    query = request.GET.get("q", "")[:200]
    context = {
        "operator": operator_name(request),
        "drawer": drawer_context(request, follow_sessions=True),
        **nav_context(query=query),
    }
    context["pending_approvals"] = context["drawer"]["pending_approvals"]
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
    drawer = drawer_context(request)
    context = {
        "operator": operator_name(request),
        "form": form,
        "filters": filters,
        "page": selectors.ledger_page(filters=filters, page=page_number),
        "choices": selectors.ledger_choices(),
        "state_choices": [("", "any"), *Activity.State.choices],
        "drawer": drawer,
        "pending_approvals": drawer["pending_approvals"],
    }
    return render(request, "controlroom/ledger.html", context)


@require_GET
def budget_meter(request: HttpRequest) -> HttpResponse:
    """The rail's budget meter alone: the page polls it, since spend changes in any process."""
    if operator_name(request) is None:
        return HttpResponse(status=403)
    return render(request, "controlroom/partials/budget_meter.html", {"budget": selectors.budget_meter()})
