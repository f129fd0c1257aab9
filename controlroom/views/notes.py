"""The Notes page: what operators taught Hermes (facts and runbooks), written, edited, deactivated.

Every write goes through `agent.memory.notes` (`note_draft_check`): a note refused here is refused
the same way by the admin and by `POST /notes`, and the form comes back with what is wrong and
nothing stored. Deleting is left to the admin (with its confirmation page): turns cite notes by
number, so a page that kept history would lose it; here a note is deactivated — kept, never
recalled — and can be reactivated.

The list is also served alone (`notes_list_view`): an open page fetches it again, with its filters,
when a note is saved anywhere (`controlroom.feeds.lists.NotesFeed`, on `NOTES_GROUP`).
"""

from __future__ import annotations

from typing import Any

from asgiref.sync import async_to_sync
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from agent.memory.cards import note_proposals_shown
from agent.memory.notes import (
    NoteDraft,
    NoteInvalid,
    NoteNotFound,
    NoteProposalDecided,
    note_create,
    note_get,
    note_proposal_save,
    note_update,
    notes_changed_publish,
    notes_list,
)
from agent.memory.uses import note_uses
from agent.models import NoteProposal
from agent.search.notes import note_matches, note_terms
from controlroom.identity import operator_name, turn_actor
from controlroom.views.pages import around_page

ACTIVE_CHOICES = (("active", "active"), ("inactive", "inactive"), ("any", "any"))


def _filters(request: HttpRequest) -> dict[str, str]:
    shown = {name: request.GET.get(name, "").strip()[:200] for name in ("entity", "tag", "q", "state")}
    if shown["state"] not in dict(ACTIVE_CHOICES):
        shown["state"] = "active"
    return shown


def _listing(request: HttpRequest) -> dict[str, Any]:
    shown = _filters(request)
    active = {"active": True, "inactive": False}.get(shown["state"])
    notes = notes_list(entity=shown["entity"], tag=shown["tag"].lstrip("#"), active=active)
    if shown["q"]:
        terms = note_terms(shown["q"])
        notes = [note for note in notes if note_matches(note, terms)]
    return {
        "filters": shown,
        "filtered": any(shown[name] for name in ("entity", "tag", "q")) or shown["state"] != "active",
        "notes": notes,
        "state_choices": ACTIVE_CHOICES,
    }


def _draft(request: HttpRequest) -> tuple[NoteDraft, dict[str, Any]]:
    """The note as the form sent it, and the form's values to show again."""
    data = request.POST
    text, entities = data.get("text", ""), data.get("entities", "")
    tags = data.get("tags", "").replace("#", " ")
    runbook, active = data.get("runbook") == "on", data.get("active", "on") == "on"
    # `scope_parse` reads the scope as text ("service:sonarr, lxc:media-*") as well as lists.
    draft = NoteDraft(text=text, entities=entities, tags=tags, runbook=runbook, active=active)  # type: ignore[arg-type]
    values = {"text": text, "entities": entities, "tags": tags, "runbook": runbook, "active": active}
    return draft, values


def _empty_form() -> dict[str, Any]:
    return {"text": "", "entities": "", "tags": "", "runbook": False, "active": True}


def _proposal_form(value: str) -> dict[str, Any] | None:
    """The form filled with a pending proposal's note (its card's Edit), so the operator changes it
    before saving; None when there is no such proposal waiting."""
    proposal = (
        NoteProposal.objects.filter(pk=int(value), status=NoteProposal.Status.PENDING).first()
        if value.isdigit()
        else None
    )
    if proposal is None:
        return None
    return {
        "text": proposal.text,
        "entities": ", ".join(proposal.entities),
        "tags": ", ".join(proposal.tags),
        "runbook": proposal.runbook,
        "active": True,
        "from_proposal": proposal.pk,
    }


def _page(request: HttpRequest, *, form: dict[str, Any], error: str = "", status: int = 200) -> HttpResponse:
    context = {
        **around_page(request, follow_notes=True),
        **_listing(request),
        "note_proposals": note_proposals_shown(),
        "form": form,
        "error": error,
    }
    return render(request, "controlroom/notes.html", context, status=status)


@require_GET
def notes_page(request: HttpRequest) -> HttpResponse:
    """Every note, newest change first; filter by entity (globs honoured), tag, words and state.
    Notes proposed in conversations wait at the top; `?from_proposal=<id>` fills the form with one."""
    return _page(request, form=_proposal_form(request.GET.get("from_proposal", "")) or _empty_form())


@require_GET
def notes_list_view(request: HttpRequest) -> HttpResponse:
    """The list alone, as the page's filters select it (for live refreshes)."""
    if operator_name(request) is None:
        return HttpResponse(status=403)
    return render(request, "controlroom/partials/note_list.html", _listing(request))


@require_POST
def note_new(request: HttpRequest) -> HttpResponse:
    operator = operator_name(request)
    if operator is None:
        return HttpResponse(status=403)
    draft, values = _draft(request)
    proposal = request.POST.get("from_proposal", "")
    try:
        if proposal.isdigit():
            # A proposal edited before saving: it is decided by this save, like its card's Save.
            values["from_proposal"] = int(proposal)
            note = note_proposal_save(int(proposal), by=turn_actor(operator), draft=draft)
        else:
            note = note_create(draft, author=turn_actor(operator))
    except (NoteInvalid, NoteProposalDecided) as refused:
        return _page(request, form=values, error=str(refused), status=400)
    except NoteNotFound:
        return _page(request, form=values, error="That proposal no longer exists.", status=400)
    async_to_sync(notes_changed_publish)()
    return HttpResponseRedirect(reverse("controlroom:note", kwargs={"note_id": note.pk}))


def _note_context(request: HttpRequest, note_id: int) -> dict[str, Any]:
    note = note_get(note_id)
    if note is None:
        raise Http404("No note has this number.")
    return {
        **around_page(request),
        "note": note,
        "uses": note_uses(note.pk),
        "form": {
            "text": note.text,
            "entities": ", ".join(note.entities),
            "tags": ", ".join(note.tags),
            "runbook": note.runbook,
            "active": note.active,
        },
        "error": "",
    }


@require_http_methods(["GET", "POST"])
def note_page(request: HttpRequest, note_id: int) -> HttpResponse:
    """One note: its text rendered, its scope and source, the turns given it; and its edit form."""
    if request.method == "GET":
        return render(request, "controlroom/note.html", _note_context(request, note_id))
    operator = operator_name(request)
    if operator is None:
        return HttpResponse(status=403)
    draft, values = _draft(request)
    try:
        note_update(note_id, draft, by=turn_actor(operator))
    except NoteNotFound:
        raise Http404("No note has this number.") from None
    except NoteInvalid as invalid:
        context = {**_note_context(request, note_id), "form": values, "error": str(invalid)}
        return render(request, "controlroom/note.html", context, status=400)
    async_to_sync(notes_changed_publish)()
    return HttpResponseRedirect(reverse("controlroom:note", kwargs={"note_id": note_id}))


@require_POST
def note_active(request: HttpRequest, note_id: int) -> HttpResponse:
    """Deactivate (kept, listed, never recalled) or reactivate a note: `active=0|1`."""
    operator = operator_name(request)
    if operator is None:
        return HttpResponse(status=403)
    note = note_get(note_id)
    if note is None:
        raise Http404("No note has this number.")
    draft = NoteDraft(
        text=note.text,
        entities=list(note.entities),
        tags=list(note.tags),
        runbook=note.runbook,
        active=request.POST.get("active") == "1",
    )
    note_update(note_id, draft, by=turn_actor(operator))
    async_to_sync(notes_changed_publish)()
    return HttpResponseRedirect(reverse("controlroom:note", kwargs={"note_id": note_id}))
