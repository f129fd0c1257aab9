"""Save or dismiss a note the model proposed ("remember that …"): one click, as the signed-in operator.

Exactly one decision wins (`agent.memory.notes.note_proposal_save`/`note_proposal_dismiss`); the
loser's card says who decided first. Every page showing the proposal redraws it (`NOTES_GROUP`).
"""

from __future__ import annotations

from channels.db import database_sync_to_async
from django.http import HttpResponse, HttpResponseBadRequest, HttpResponseForbidden, HttpResponseNotFound
from django.views.decorators.http import require_POST

from access.refusals import refusal_note
from agent.memory.cards import note_proposal_card
from agent.memory.notes import (
    NoteInvalid,
    NoteNotFound,
    NoteProposalDecided,
    note_proposal_dismiss,
    note_proposal_save,
    notes_changed_publish,
)
from controlroom import fragments
from controlroom.identity import operator_name
from controlroom.views.context import HtmxHttpRequest, redirect_back


@require_POST
async def decide(request: HtmxHttpRequest) -> HttpResponse:
    """`decision` is `save:<id>` or `dismiss:<id>`; answers with every drawing of the card redrawn."""
    operator = operator_name(request)
    if operator is None:
        message = "Saving a note needs an operator identity."
        refusal_note(request, "no_operator", message)
        return HttpResponseForbidden(message)
    action, _, number = str(request.POST.get("decision") or "").partition(":")
    if action not in ("save", "dismiss") or not number.isdigit() or len(number) > 12:
        refusal_note(request, "invalid_decision", "Not a valid decision: decision")
        return HttpResponseBadRequest("Not a valid decision: decision is save:<id> or dismiss:<id>.")
    proposal_id = int(number)
    try:
        if action == "save":
            note = await database_sync_to_async(note_proposal_save)(proposal_id, by=operator)
            notice = f"Saved as note {note.pk}: Hermes is given it from now on."
        else:
            await database_sync_to_async(note_proposal_dismiss)(proposal_id, by=operator)
            notice = "Dismissed: nothing was saved."
    except NoteNotFound:
        return HttpResponseNotFound("No such note proposal.")
    except (NoteProposalDecided, NoteInvalid) as exc:
        notice = str(exc)
    else:
        await notes_changed_publish()
    if not request.htmx:
        return redirect_back(request, "controlroom:home")
    card = await database_sync_to_async(note_proposal_card)(proposal_id)
    assert card is not None
    return HttpResponse(fragments.note_proposal_cards_replace(card, notice=notice))
