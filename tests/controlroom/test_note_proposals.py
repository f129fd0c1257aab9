"""Saving or dismissing a proposed note from its card: one click, one winner, the loser told who."""

from __future__ import annotations

import pytest
from channels.db import database_sync_to_async
from django.test import AsyncClient

from agent.memory.notes import NoteDraft, note_propose
from agent.models import AgentSession, Note, NoteProposal
from common.markdown import markdown_render

pytestmark = pytest.mark.django_db(transaction=True)

HTMX = {"HX-Request": "true"}
DECIDE = "/ui/note-proposals/decide/"


def _proposed() -> NoteProposal:
    session = AgentSession.objects.create(actor="operator:alice", origin="ui", title="jellyfin storage")
    draft = NoteDraft("Jellyfin transcodes\n\nThey go to `/mnt/scratch`.", entities=["service:jellyfin"])
    return note_propose(draft, proposed_by="operator:alice", session_id=session.id, turn_id=None)


async def test_save_makes_the_note_from_the_session_and_a_second_decision_is_told_who_won() -> None:
    proposal = await database_sync_to_async(_proposed)()

    saved = await AsyncClient().post(DECIDE, {"decision": f"save:{proposal.pk}"}, headers=HTMX)

    assert saved.status_code == 200
    html = saved.content.decode()
    note = await Note.objects.aget()
    assert (note.author, note.source_session_id, note.entities) == (
        "operator",
        proposal.session_id,
        ["service:jellyfin"],
    )
    # Every drawing of the card in the page (rail, chat) shows it saved, linking the note.
    assert f'hx-swap-oob="outerHTML:.note-proposal-{proposal.pk}"' in html
    assert f'Saved by operator as <a class="note-link" href="/ui/notes/{note.pk}/">[note {note.pk}]</a>' in html
    assert "<code>/mnt/scratch</code>" in html and 'name="decision"' not in html

    late = await AsyncClient().post(DECIDE, {"decision": f"dismiss:{proposal.pk}"}, headers=HTMX)

    assert "Already saved by operator." in late.content.decode()
    assert (await NoteProposal.objects.aget()).status == "saved" and await Note.objects.acount() == 1


async def test_dismiss_saves_nothing() -> None:
    proposal = await database_sync_to_async(_proposed)()

    dismissed = await AsyncClient().post(DECIDE, {"decision": f"dismiss:{proposal.pk}"}, headers=HTMX)

    assert "Dismissed by operator: nothing was saved" in dismissed.content.decode()
    assert await Note.objects.acount() == 0


@pytest.mark.parametrize("decision", ["", "save", "save:", "keep:1", "save:1 OR 1=1", "save:-1"])
async def test_a_malformed_decision_is_refused(decision: str) -> None:
    refused = await AsyncClient().post(DECIDE, {"decision": decision}, headers=HTMX)
    assert refused.status_code == 400


async def test_an_unknown_proposal_is_not_found() -> None:
    assert (await AsyncClient().post(DECIDE, {"decision": "save:999"}, headers=HTMX)).status_code == 404


def test_note_citations_link_to_the_note_and_nothing_else_does() -> None:
    html = markdown_render(
        'Per [note 12] and **[note 3]**; not `[note 4]`, [note 5x], [note 6"><b>], [see [note 7]](https://a.example).',
        note_url="/ui/notes/",
    )
    assert '<a href="/ui/notes/12/" class="note-link" rel="noopener noreferrer nofollow">[note 12]</a>' in html
    assert '<strong><a href="/ui/notes/3/" class="note-link"' in html
    assert "<code>[note 4]</code>" in html and "[note 5x]" in html and "<b>" not in html
    # A citation inside the model's own link stays its text: no link inside a link.
    assert html.count("note-link") == 2
    assert "note-link" not in markdown_render("Per [note 12].")
    # Raw HTML is never a link, whatever class it claims.
    assert "<a " not in markdown_render('<a class="note-link" href="/x">x</a>', note_url="/ui/notes/")
