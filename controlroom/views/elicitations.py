"""Answering an MCP server's question (elicitation) from its card in the rail.

The card's form posts the fields under `f:<name>` (a server's field names never collide with the
form's own `action` and CSRF token) and the button pressed as `action`. The answer is stored
first, then the turn waiting for it is woken, wherever it runs (`agent.elicitation.store`).
"""

from __future__ import annotations

import uuid

from channels.db import database_sync_to_async
from django.http import HttpResponse, HttpResponseBadRequest, HttpResponseForbidden
from django.utils.html import format_html
from django.views.decorators.http import require_POST

from access.refusals import refusal_note
from agent.elicitation import store as elicitations
from agent.elicitation.types import ACTIONS, ElicitContentError
from common import dom
from controlroom.identity import operator_name
from controlroom.views.context import HtmxHttpRequest, redirect_back

FIELD_PREFIX = "f:"


@require_POST
async def answer(request: HtmxHttpRequest, elicitation_id: uuid.UUID) -> HttpResponse:
    """Accept (with the form's values), decline or cancel, as the signed-in operator.

    With htmx the answer is `hx-swap="none"` plus out-of-band swaps: a problem with the form is
    shown under it (what the operator typed stays); an accepted answer needs nothing here, since
    every page redraws its cards from the live events. Without htmx: back to the page.
    """
    operator = operator_name(request)
    if operator is None:
        message = "Answering a tool's question needs an operator identity."
        refusal_note(request, "no_operator", message)
        return HttpResponseForbidden(message)
    action = request.POST.get("action", "")
    if action not in ACTIONS:
        return HttpResponseBadRequest("Not an answer: the action must be accept, decline or cancel.")
    # A multi-select sends one value per ticked box (after an empty marker); every other field one.
    values = {
        key.removeprefix(FIELD_PREFIX): sent if len(sent) > 1 else sent[0]
        for key, sent in request.POST.lists()
        if key.startswith(FIELD_PREFIX) and sent and action == "accept"
    }
    problem = ""
    try:
        row = await database_sync_to_async(elicitations.elicitation_answer)(
            elicitation_id=elicitation_id, action=action, values=values, operator=operator, from_form=True
        )
    except elicitations.ElicitationNotFound:
        problem = "This question no longer exists."
    except elicitations.ElicitationClosed as closed:
        problem = str(closed)
    except ElicitContentError as invalid:
        problem = "Check the form: " + "; ".join(f"{name} {why}" for name, why in invalid.errors.items())
    else:
        await elicitations.elicitation_answered_publish(row)
    if not request.htmx:
        return redirect_back(request, "controlroom:home")
    errors_id = dom.elicitation_dom_id(elicitation_id, "rail") + "-errors"
    return HttpResponse(
        format_html('<p id="{}" class="card-notice" role="alert" hx-swap-oob="true">{}</p>', errors_id, problem)
    )
