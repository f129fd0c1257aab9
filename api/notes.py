"""`POST /notes`, `GET /notes`, `GET /notes/<id>`, `PATCH /notes/<id>`: operators' notes for scripts.

The same notes as the control room's Notes page, written through the same check
(`agent.memory.notes.note_draft_check`): a body that is not a valid note answers 400 with what is
wrong, and nothing is stored. Any operator the access layer lets in may write a note, as on the
page; the note records who (`author`, `updated_by`). Text is redacted before it is stored, so the
answer shows a configured secret as `[REDACTED]`.
"""

from __future__ import annotations

from typing import Any

from channels.db import database_sync_to_async
from django.http import HttpRequest, JsonResponse
from django.urls import reverse

from agent.memory.notes import (
    NoteDraft,
    NoteInvalid,
    NoteNotFound,
    note_as_dict,
    note_create,
    note_get,
    note_update,
    notes_changed_publish,
    notes_list,
)
from agent.models import Note
from api.bodies import fields_check, json_object_read
from api.errors import ApiError, api_view
from api.operator import request_actor

FIELDS = ("text", "entities", "tags", "runbook", "active")
FILTER_MAX_CHARS = 200
NOTE_ID_MAX = 2**63 - 1


@api_view("GET", "POST")
async def notes(request: HttpRequest) -> JsonResponse:
    """GET: the notes, newest change first (`entity`, `tag`, `active` filters); POST: a new note."""
    actor = request_actor(request)
    if request.method == "POST":
        return await _note_new(request, actor)
    params = request.GET
    entity = _filter(params.get("entity"), "entity")
    tag = _filter(params.get("tag"), "tag").lstrip("#")
    active = _active(params.get("active"))
    found = await database_sync_to_async(notes_list)(entity=entity, tag=tag, active=active)
    return JsonResponse({"count": len(found), "notes": [note_as_dict(note) for note in found]})


@api_view("GET", "PATCH")
async def note_detail(request: HttpRequest, note_id: str) -> JsonResponse:
    """GET: one note; PATCH: change the fields given (any of text, entities, tags, runbook, active)."""
    actor = request_actor(request)
    number = _note_id(note_id)
    if request.method == "GET":
        note = await database_sync_to_async(note_get)(number)
        if note is None:
            raise ApiError(404, "note_not_found", f"There is no note {number}.")
        return JsonResponse(note_as_dict(note))
    body = json_object_read(request)
    fields_check(body, allowed=FIELDS)
    _types_check(body)
    try:
        note = await database_sync_to_async(_note_patch)(number, body, actor)
    except NoteNotFound:
        raise ApiError(404, "note_not_found", f"There is no note {number}.") from None
    except NoteInvalid as invalid:
        raise ApiError(400, "invalid_note", str(invalid)) from None
    await notes_changed_publish()
    return JsonResponse(note_as_dict(note))


async def _note_new(request: HttpRequest, actor: str) -> JsonResponse:
    body = json_object_read(request)
    fields_check(body, allowed=FIELDS)
    _types_check(body)
    if "text" not in body:
        raise ApiError(400, "invalid_note", '"text" is required: the fact or the procedure, in Markdown.')
    draft = NoteDraft(
        text=body["text"],
        entities=body.get("entities") or [],
        tags=body.get("tags") or [],
        runbook=bool(body.get("runbook", False)),
        active=bool(body.get("active", True)),
    )
    try:
        note = await database_sync_to_async(note_create)(draft, author=actor)
    except NoteInvalid as invalid:
        raise ApiError(400, "invalid_note", str(invalid)) from None
    await notes_changed_publish()
    response = JsonResponse(note_as_dict(note), status=201)
    response["Location"] = reverse("api:note", kwargs={"note_id": note.pk})
    return response


def _note_patch(note_id: int, body: dict[str, Any], actor: str) -> Note:
    note = note_get(note_id)
    if note is None:
        raise NoteNotFound(str(note_id))
    draft = NoteDraft(
        text=body.get("text", note.text),
        entities=body.get("entities", list(note.entities)) or [],
        tags=body.get("tags", list(note.tags)) or [],
        runbook=body.get("runbook", note.runbook),
        active=body.get("active", note.active),
    )
    return note_update(note_id, draft, by=actor)


def _types_check(body: dict[str, Any]) -> None:
    """JSON types as documented, before the note's own rules (which say what is wrong with a value)."""
    if "text" in body and not isinstance(body["text"], str):
        raise ApiError(400, "invalid_note", '"text" must be a string of Markdown.')
    for name in ("entities", "tags"):
        value = body.get(name, [])
        if not (isinstance(value, list) and all(isinstance(item, str) for item in value)):
            raise ApiError(400, "invalid_note", f'"{name}" must be a list of strings.')
    for name in ("runbook", "active"):
        if name in body and not isinstance(body[name], bool):
            raise ApiError(400, "invalid_note", f'"{name}" must be true or false.')


def _filter(raw: str | None, name: str) -> str:
    value = (raw or "").strip()
    if len(value) > FILTER_MAX_CHARS:
        raise ApiError(400, "invalid_parameter", f"{name} must be at most {FILTER_MAX_CHARS} characters.")
    return value


def _active(raw: str | None) -> bool | None:
    if raw is None or raw == "":
        return None
    if raw == "true":
        return True
    if raw == "false":
        return False
    raise ApiError(400, "invalid_parameter", f"active must be true or false, not {raw[:40]!r}.")


def _note_id(raw: str) -> int:
    if not raw.isascii() or not raw.isdigit() or not 0 < int(raw) <= NOTE_ID_MAX:
        raise ApiError(400, "invalid_note_id", f"A note's id is a positive number, not {raw[:40]!r}.")
    return int(raw)
