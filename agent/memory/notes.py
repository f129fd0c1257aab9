"""Notes and note proposals: what operators taught Hermes, kept and changed in one place.

Every entry point (the Notes page, the admin, `POST /notes`, a proposal saved with one click)
goes through `note_draft_check`, so a note is valid the same way wherever it was written, and
through the Redacted fields of `agent.models.Note`, so a configured secret is never stored.
"""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from channels.layers import get_channel_layer
from django.db import transaction
from django.utils import timezone

from agent.models import AgentSession, Note, NoteProposal
from common.redaction import redact

logger = logging.getLogger(__name__)

# Every page showing notes or note proposals listens here (the Notes page, the rail's proposal
# cards): one was created, changed, saved or dismissed. The message names nothing: pages redraw.
NOTES_GROUP = "hermes.notes"

TEXT_MAX_CHARS = 8_000
SCOPE_MAX = 20
# `kind:name`, the name possibly a glob (`lxc:media-*`), or `*` alone: every question.
_ENTITY = re.compile(r"^(\*|[a-z][a-z0-9_-]*:[A-Za-z0-9_.*?\[\]/@-]+)$")
_TAG = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,39}$")


class NoteInvalid(ValueError):
    """What is wrong with a note, said so its writer can fix it; nothing was stored."""


class NoteNotFound(Exception):
    pass


class NoteProposalDecided(Exception):
    """Someone decided it first; the message says who and how."""

    def __init__(self, proposal: NoteProposal) -> None:
        super().__init__(f"Already {proposal.status} by {proposal.decided_by or 'someone else'}.")
        self.proposal = proposal


@dataclass(frozen=True)
class NoteDraft:
    """A note as written (page, API, admin, proposal), before it is checked and stored."""

    text: str
    entities: list[str] = field(default_factory=list)
    tags: list[str] = field(default_factory=list)
    runbook: bool = False
    active: bool = True


def scope_parse(value: Any, *, name: str) -> list[str]:
    """A list of scope entries from a list, or from text separated by commas, spaces or lines."""
    if value is None or value == "":
        return []
    if isinstance(value, str):
        items = re.split(r"[\s,]+", value)
    elif isinstance(value, list | tuple):
        if not all(isinstance(item, str) for item in value):
            raise NoteInvalid(f"{name} must be a list of strings.")
        items = list(value)
    else:
        raise NoteInvalid(f"{name} must be a list of strings.")
    seen: dict[str, None] = {}
    for item in items:
        item = item.strip()
        if item:
            seen.setdefault(item, None)
    return list(seen)


def note_draft_check(draft: NoteDraft) -> NoteDraft:
    """The draft as it will be stored; `NoteInvalid` naming the first thing wrong."""
    if not isinstance(draft.text, str) or not draft.text.strip():
        raise NoteInvalid("A note needs text: the fact or the procedure, in Markdown.")
    text = draft.text.strip()
    if len(text) > TEXT_MAX_CHARS:
        raise NoteInvalid(f"The note has {len(text):,} characters; the limit is {TEXT_MAX_CHARS:,}.")
    entities = scope_parse(draft.entities, name="entities")
    tags = [tag.lower() for tag in scope_parse(draft.tags, name="tags")]
    for entity in entities:
        if not _ENTITY.match(entity):
            raise NoteInvalid(
                f"{entity!r} is not an entity: write a slug (service:sonarr), a glob (lxc:media-*) "
                "or * for every question."
            )
    for tag in tags:
        if not _TAG.match(tag):
            raise NoteInvalid(f"{tag!r} is not a tag: a word of letters, digits, '_', '-' or '.' (at most 40).")
    if len(entities) > SCOPE_MAX or len(tags) > SCOPE_MAX:
        raise NoteInvalid(f"A note takes at most {SCOPE_MAX} entities and {SCOPE_MAX} tags.")
    if draft.runbook and not entities and not tags:
        raise NoteInvalid("A runbook needs what it is for: an entity (service:sonarr) or a signal kind as a tag.")
    return NoteDraft(
        text=redact(text), entities=entities, tags=tags, runbook=bool(draft.runbook), active=bool(draft.active)
    )


def note_create(
    draft: NoteDraft,
    *,
    author: str,
    source_session_id: uuid.UUID | None = None,
    source_turn: uuid.UUID | None = None,
) -> Note:
    """Store a new note; `NoteInvalid` (and nothing stored) when the draft is wrong."""
    checked = note_draft_check(draft)
    return Note.objects.create(
        text=checked.text,
        entities=checked.entities,
        tags=checked.tags,
        runbook=checked.runbook,
        active=checked.active,
        author=author,
        source_session_id=source_session_id,
        source_turn=source_turn,
    )


def note_update(note_id: int, draft: NoteDraft, *, by: str) -> Note:
    """Change a note; `NoteInvalid` (nothing changed) or `NoteNotFound`."""
    checked = note_draft_check(draft)
    note = Note.objects.filter(pk=note_id).first()
    if note is None:
        raise NoteNotFound(str(note_id))
    note.text, note.entities, note.tags = checked.text, checked.entities, checked.tags
    note.runbook, note.active, note.updated_by = checked.runbook, checked.active, by
    note.save()
    return note


def note_get(note_id: int) -> Note | None:
    return Note.objects.filter(pk=note_id).first()


def notes_list(*, entity: str = "", tag: str = "", active: bool | None = None) -> list[Note]:
    """Notes, newest change first; with `entity`, those whose scope covers that slug (globs too)."""
    from agent.memory.recall import scope_covers

    rows: Iterable[Note] = Note.objects.all() if active is None else Note.objects.filter(active=active)
    found = []
    for note in rows:
        if entity and not any(scope_covers(pattern, entity) for pattern in note.entities):
            continue
        if tag and tag.lower() not in note.tags:
            continue
        found.append(note)
    return found


def note_as_dict(note: Note) -> dict[str, Any]:
    """A note as the API and the built-in tools give it."""
    return {
        "id": note.pk,
        "title": note.title,
        "text": note.text,
        "entities": list(note.entities),
        "tags": list(note.tags),
        "runbook": note.runbook,
        "active": note.active,
        "author": note.author,
        "updated_by": note.updated_by,
        "source_session": str(note.source_session_id) if note.source_session_id else None,
        "source_turn": str(note.source_turn) if note.source_turn else None,
        "created_at": note.created_at.isoformat(),
        "updated_at": note.updated_at.isoformat(),
    }


# --- proposals -----------------------------------------------------------------------------------


def note_propose(
    draft: NoteDraft,
    *,
    proposed_by: str,
    session_id: uuid.UUID | None,
    turn_id: uuid.UUID | None,
    tool_use_id: str = "",
) -> NoteProposal:
    """Hold a note the model proposed until an operator saves or dismisses it; `NoteInvalid`."""
    checked = note_draft_check(draft)
    return NoteProposal.objects.create(
        session_id=session_id if session_id and AgentSession.objects.filter(pk=session_id).exists() else None,
        turn_id=turn_id,
        tool_use_id=tool_use_id[:100],
        proposed_by=proposed_by,
        text=checked.text,
        entities=checked.entities,
        tags=checked.tags,
        runbook=checked.runbook,
    )


def note_proposal_save(proposal_id: int, *, by: str, draft: NoteDraft | None = None) -> Note:
    """An operator's click: the proposal becomes a note (edited first when `draft` is given), with
    the conversation as its source. Exactly one decision wins; `NoteProposalDecided` for the others,
    `NoteNotFound`, or `NoteInvalid` (nothing decided) for an edit that is not a valid note."""
    with transaction.atomic():
        proposal = NoteProposal.objects.select_for_update().filter(pk=proposal_id).first()
        if proposal is None:
            raise NoteNotFound(str(proposal_id))
        if proposal.status != NoteProposal.Status.PENDING:
            raise NoteProposalDecided(proposal)
        written = draft or NoteDraft(
            text=proposal.text, entities=list(proposal.entities), tags=list(proposal.tags), runbook=proposal.runbook
        )
        note = note_create(written, author=by, source_session_id=proposal.session_id, source_turn=proposal.turn_id)
        won = NoteProposal.objects.filter(pk=proposal_id, status=NoteProposal.Status.PENDING).update(
            status=NoteProposal.Status.SAVED, decided_by=by, decided_at=timezone.now(), note=note
        )
        if not won:  # SQLite has no row lock: the conditional update is the decision there
            transaction.set_rollback(True)
            raise NoteProposalDecided(NoteProposal.objects.get(pk=proposal_id))
    return note


def note_proposal_dismiss(proposal_id: int, *, by: str) -> NoteProposal:
    """An operator's "no": nothing is saved. `NoteProposalDecided` when someone decided first."""
    won = NoteProposal.objects.filter(pk=proposal_id, status=NoteProposal.Status.PENDING).update(
        status=NoteProposal.Status.DISMISSED, decided_by=by, decided_at=timezone.now()
    )
    proposal = NoteProposal.objects.filter(pk=proposal_id).first()
    if proposal is None:
        raise NoteNotFound(str(proposal_id))
    if not won:
        raise NoteProposalDecided(proposal)
    return proposal


def note_proposals_pending() -> list[NoteProposal]:
    """Proposals waiting for an operator, oldest first."""
    return list(NoteProposal.objects.filter(status=NoteProposal.Status.PENDING).order_by("created_at"))


async def notes_changed_publish() -> None:
    """Tell every page showing notes or note proposals to redraw; a failure costs a redraw, not a note."""
    layer = get_channel_layer()
    if layer is None:
        return
    try:
        await layer.group_send(NOTES_GROUP, {"type": "notes.changed"})
    except Exception:
        logger.warning("could not tell pages about a note", exc_info=True)
