"""Where a note was used: the recent turns that were given it (`Turn.notes_given`).

`notes_given` is a JSON list of `{"id", "title", "runbook"}`. SQLite's JSON has no `contains`
lookup, so instead of asking the database which turns name a note, the newest turns given any note
are read (at most `TURNS_SCANNED`, only the columns needed) and filtered here; the same on both
databases, and bounded whatever the history holds.
"""

from __future__ import annotations

import datetime
import uuid
from dataclasses import dataclass

from agent.models import Turn

TURNS_SCANNED = 2000
TURNS_SHOWN = 20


@dataclass(frozen=True)
class NoteUse:
    turn_id: uuid.UUID
    session_id: uuid.UUID
    session_title: str
    actor: str
    started_at: datetime.datetime


def note_uses(note_id: int, *, limit: int = TURNS_SHOWN, scanned: int = TURNS_SCANNED) -> list[NoteUse]:
    """The newest turns (of the newest `scanned` given any note) that were given note `note_id`."""
    rows = (
        Turn.objects.exclude(notes_given=[])
        .select_related("session")
        .only("id", "session_id", "session__title", "actor", "started_at", "notes_given")
        .order_by("-started_at")[:scanned]
    )
    found: list[NoteUse] = []
    for turn in rows:
        given = turn.notes_given if isinstance(turn.notes_given, list) else []
        if any(isinstance(entry, dict) and entry.get("id") == note_id for entry in given):
            found.append(
                NoteUse(
                    turn_id=turn.pk,
                    session_id=turn.session_id,
                    session_title=turn.session.title or "Untitled session",
                    actor=turn.actor,
                    started_at=turn.started_at,
                )
            )
            if len(found) >= limit:
                break
    return found
