"""The chat: home and session pages, asking, stopping, the drawer's new chat, the sessions nav."""

from __future__ import annotations

import uuid
from typing import Any

from channels.db import database_sync_to_async
from django.http import Http404, HttpResponse, HttpResponseForbidden
from django.shortcuts import redirect, render
from django.template.loader import render_to_string
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import push_url, reswap, retarget

from agent.elicitation.store import elicitation_by_operator
from agent.engine.runner import TurnRejected
from agent.live import turn_registry
from controlroom import selectors
from controlroom.forms import AskForm
from controlroom.identity import operator_name, turn_actor
from controlroom.views.context import (
    DRAWER_SESSION_KEY,
    HtmxHttpRequest,
    conversation_context,
    nav_context,
    redirect_back,
)

BUSY = "Hermes is still answering in this session: wait for the answer or press Stop, then ask again."


@require_GET
def home(request: HtmxHttpRequest, session_id: uuid.UUID | None = None) -> HttpResponse:
    """The control room: sessions, the conversation (a new chat, or `session_id`), the rail.

    `?before=<turn id>`: the session's turns before that one (a long session opens on its latest).
    """
    before = None
    if session_id is not None:
        if not selectors.session_exists(session_id=session_id):
            raise Http404("There is no session with this id.")
        # Written only when it changes: a session write is a transaction on every page view.
        if request.session.get(DRAWER_SESSION_KEY) != str(session_id):
            request.session[DRAWER_SESSION_KEY] = str(session_id)
        try:
            before = uuid.UUID(request.GET["before"]) if request.GET.get("before") else None
        except ValueError:
            raise Http404("There is no such turn in this session.") from None
    return render(request, "controlroom/home.html", _home_context(request, session_id=session_id, before=before))


def _home_context(
    request: HtmxHttpRequest,
    *,
    session_id: uuid.UUID | None,
    text: str = "",
    error: str = "",
    before: uuid.UUID | None = None,
) -> dict[str, Any]:
    return {
        "operator": operator_name(request),
        **conversation_context(session_id=session_id, place="home", text=text, error=error, before=before),
        **nav_context(current=str(session_id or "")),
    }


@require_POST
async def ask(request: HtmxHttpRequest) -> HttpResponse:
    """Start a turn; the answer streams over the page's websocket, not in this response."""
    operator = operator_name(request)
    if operator is None:
        return HttpResponseForbidden("No operator identity.")
    form = AskForm(request.POST)
    place = "drawer" if request.POST.get("place") == "drawer" else "home"
    if not form.is_valid():
        error = " ".join(str(message) for messages in form.errors.values() for message in messages)
        return await _composer(request, place=place, text=request.POST.get("message", ""), error=error)
    session_id: uuid.UUID | None = form.cleaned_data["session"]
    text: str = form.cleaned_data["message"]
    # Only a change is a pick: a session left on the selector's default keeps following HERMES_MODEL.
    picked: str = form.cleaned_data["model"]
    current = await database_sync_to_async(selectors.session_model)(session_id=session_id)
    model = picked if picked and picked != current else None
    try:
        handle = await turn_registry().start(
            text=text,
            actor=turn_actor(operator),
            origin="ui",
            session_id=session_id,
            model=model,
            answerer=elicitation_by_operator,
        )
    except TurnRejected as rejected:
        error = rejected.operator_message(busy=BUSY)
        return await _composer(request, place=place, session_id=session_id, text=text, error=error)
    await request.session.aset(DRAWER_SESSION_KEY, str(handle.session_id))
    if not request.htmx:
        return redirect("controlroom:session", session_id=handle.session_id)
    if session_id is not None:
        return await _composer(request, place=place, session_id=session_id)
    # A new session: this page's conversation becomes that session's (its socket joins it).
    response = await _conversation(request, place=place, session_id=handle.session_id)
    response = reswap(retarget(response, "#conversation"), "outerHTML")
    if place == "home":
        response = push_url(response, reverse("controlroom:session", kwargs={"session_id": handle.session_id}))
    return response


@require_POST
async def turn_stop(request: HtmxHttpRequest, turn_id: uuid.UUID) -> HttpResponse:
    """Stop a running turn, in whichever process runs it (the partial answer is kept)."""
    if operator_name(request) is None:
        return HttpResponseForbidden("No operator identity.")
    await turn_registry().turn_stop(turn_id=turn_id)
    if not request.htmx:
        return redirect_back(request, "controlroom:home")
    return HttpResponse(status=204)


@require_POST
async def drawer_new(request: HtmxHttpRequest) -> HttpResponse:
    """A new chat in the drawer (the next question opens a session)."""
    await request.session.apop(DRAWER_SESSION_KEY, None)
    return await _conversation(request, place="drawer", session_id=None)


@require_GET
def sessions_nav(request: HtmxHttpRequest) -> HttpResponse:
    """The session list of the nav, filtered as the operator types."""
    query = request.GET.get("q", "")[:200]
    context = nav_context(current=request.GET.get("current", ""), query=query)
    return render(request, "controlroom/partials/session_list.html", context)


async def _composer(
    request: HtmxHttpRequest, *, place: str, session_id: uuid.UUID | None = None, text: str = "", error: str = ""
) -> HttpResponse:
    """The composer again: emptied after a question, or keeping it beside the reason it was refused."""
    if not request.htmx:
        # Without htmx the whole page comes back, the refusal shown in its composer.
        page = await database_sync_to_async(_home_context)(request, session_id=session_id, text=text, error=error)
        return render(request, "controlroom/home.html", page, status=400 if error else 200)
    picker = await database_sync_to_async(selectors.model_picker)(session_id=session_id)
    context = {
        "place": place,
        "session_id": str(session_id or ""),
        "composer": {"text": text, "error": error, "autofocus": True, **picker},
    }
    return render(request, "controlroom/partials/composer.html", context)


async def _conversation(request: HtmxHttpRequest, *, place: str, session_id: uuid.UUID | None) -> HttpResponse:
    context = await database_sync_to_async(conversation_context)(session_id=session_id, place=place)
    nav = await database_sync_to_async(nav_context)(current=str(session_id or ""))
    html = render_to_string("controlroom/partials/conversation.html", context, request=request)
    if place == "home":
        html += render_to_string("controlroom/partials/session_list.html", {**nav, "oob": True}, request=request)
    return HttpResponse(html)
