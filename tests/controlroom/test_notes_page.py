"""The Notes page: operators write, find, edit and deactivate what Hermes should know; a note's page
shows its text as sanitized Markdown, its scope, its source and the turns given it; the open list
follows notes saved elsewhere."""

from __future__ import annotations

import html
import re

import pytest
from django.test import Client

from agent.memory.notes import NoteDraft, note_create, notes_changed_publish
from agent.models import AgentSession, Note, Turn
from tests.controlroom.conftest import Connect

pytestmark = pytest.mark.django_db(transaction=True)

HOSTILE = '<img src=x onerror="alert(1)">'


def _listed(page: str) -> list[int]:
    return [int(found) for found in re.findall(r'data-note="(\d+)"', page)]


def _note(text: str, **scope: object) -> Note:
    return note_create(NoteDraft(text=text, **scope), author="operator:alice")  # type: ignore[arg-type]


@pytest.fixture
def notes() -> dict[str, Note]:
    return {
        "sonarr": _note(
            "Sonarr's indexer timeouts clear with a restart\n\nDon't touch prowlarr.",
            entities=["service:sonarr"],
            tags=["http_timeout"],
            runbook=True,
        ),
        "media": _note("Media LXCs keep scratch on /mnt/scratch", entities=["lxc:media-*"]),
        "old": _note("Collabora must be restarted after a nextcloud upgrade", tags=["upgrade"], active=False),
    }


def test_the_page_lists_notes_with_scope_runbook_state_and_author(client: Client, notes: dict[str, Note]) -> None:
    page = client.get("/ui/notes/").content.decode()

    assert _listed(page) == [notes["media"].pk, notes["sonarr"].pk]  # active ones, newest change first
    assert "service:sonarr" in page and "#http_timeout" in page and "note-runbook" in page
    assert "operator:alice" in page and 'aria-current="page">Notes' in page
    assert "{# note proposals" not in page  # the merger's marker is a template comment


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ({"entity": "lxc:media-1"}, ["media"]),  # a glob in the note's scope covers the slug asked for
        ({"entity": "service:sonarr"}, ["sonarr"]),
        ({"tag": "#http_timeout"}, ["sonarr"]),
        ({"q": "prowlarr"}, ["sonarr"]),
        ({"q": "restart -prowlarr", "state": "any"}, ["old"]),
        ({"state": "inactive"}, ["old"]),
    ],
)
def test_filters_by_entity_tag_words_and_state(
    client: Client, notes: dict[str, Note], query: dict[str, str], expected: list[str]
) -> None:
    wanted = [notes[name].pk for name in expected]
    assert _listed(client.get("/ui/notes/", query).content.decode()) == wanted
    assert _listed(client.get("/ui/notes/list/", query).content.decode()) == wanted


def test_a_note_written_on_the_page_is_stored_with_its_author_and_scope(client: Client) -> None:
    answer = client.post(
        "/ui/notes/new/",
        {
            "text": "Jellyfin transcodes go to /mnt/scratch",
            "entities": "service:jellyfin lxc:media-*",
            "tags": "#storage",
            "runbook": "",
        },
    )

    note = Note.objects.get()
    assert answer.status_code == 302 and answer["Location"] == f"/ui/notes/{note.pk}/"
    assert (note.entities, note.tags, note.runbook, note.active) == (
        ["service:jellyfin", "lxc:media-*"],
        ["storage"],
        False,
        True,
    )
    assert note.author.startswith("operator:")


def test_a_note_that_is_not_valid_comes_back_with_what_is_wrong_and_nothing_stored(client: Client) -> None:
    answer = client.post("/ui/notes/new/", {"text": "Restart it first", "entities": "sonarr", "runbook": "on"})

    page = answer.content.decode()
    assert answer.status_code == 400 and Note.objects.count() == 0
    assert "&#x27;sonarr&#x27; is not an entity" in page and "Restart it first</textarea>" in page


def test_a_notes_page_renders_its_markdown_sanitized_with_its_source_and_the_turns_given_it(client: Client) -> None:
    session = AgentSession.objects.create(title="sonarr keeps timing out", actor="operator:alice", origin="ui")
    note = note_create(
        NoteDraft(
            text=f"# Sonarr\n\n**Restart** it. {HOSTILE}\n\n<script>alert(2)</script>", entities=["service:sonarr"]
        ),
        author="operator:alice",
        source_session_id=session.pk,
    )
    given = Turn.objects.create(
        session=session, actor="operator:bob", notes_given=[{"id": note.pk, "title": "Sonarr", "runbook": False}]
    )
    Turn.objects.create(
        session=session, actor="operator:bob", notes_given=[{"id": note.pk + 1, "title": "other", "runbook": False}]
    )

    page = client.get(f"/ui/notes/{note.pk}/").content.decode()

    article = page.split('note-text"', 1)[1].split("</article>", 1)[0]
    assert "<h1>Sonarr</h1>" in article and "<strong>Restart</strong>" in article
    assert "<img" not in article and "<script" not in article and html.escape(HOSTILE, quote=False) in article
    assert f'href="/ui/s/{session.pk}/"' in page and "sonarr keeps timing out" in page
    assert page.count('class="note-use"') == 1 and f"#turn-{given.pk}" in page


def test_an_edit_is_stored_and_a_bad_one_changes_nothing(client: Client, notes: dict[str, Note]) -> None:
    note = notes["media"]
    bad = client.post(f"/ui/notes/{note.pk}/", {"text": "", "entities": "lxc:media-*", "active": "on"})
    assert bad.status_code == 400 and "A note needs text" in bad.content.decode()
    assert Note.objects.get(pk=note.pk).text == "Media LXCs keep scratch on /mnt/scratch"

    good = client.post(
        f"/ui/notes/{note.pk}/",
        {"text": "Media LXCs scratch: /mnt/fast", "entities": "lxc:media-*", "tags": "storage", "active": "on"},
    )
    assert good.status_code == 302
    changed = Note.objects.get(pk=note.pk)
    assert (changed.text, changed.tags, changed.active) == ("Media LXCs scratch: /mnt/fast", ["storage"], True)
    assert changed.updated_by.startswith("operator:")


def test_deactivated_notes_are_kept_and_can_come_back(client: Client, notes: dict[str, Note]) -> None:
    note = notes["sonarr"]
    client.post(f"/ui/notes/{note.pk}/active/", {"active": "0"})
    assert Note.objects.get(pk=note.pk).active is False
    assert note.pk not in _listed(client.get("/ui/notes/").content.decode())

    client.post(f"/ui/notes/{note.pk}/active/", {"active": "1"})
    assert Note.objects.get(pk=note.pk).active is True


def test_a_hostile_title_is_escaped_in_the_list(client: Client) -> None:
    _note(f"Beware {HOSTILE}", entities=["service:caddy"])
    page = client.get("/ui/notes/").content.decode()
    assert HOSTILE not in page and html.escape(HOSTILE) in page


async def test_the_open_page_fetches_its_list_again_when_a_note_is_saved_elsewhere(socket: Connect) -> None:
    notes_page = await socket("/ws/ui/?notes=1")
    snapshot = await notes_page.next()
    assert 'id="note-refresh"' in snapshot

    await notes_changed_publish()

    frame = await notes_page.until(lambda frame: 'id="note-refresh"' in frame)
    assert 'hx-get="/ui/notes/list/"' in frame and 'hx-include="#note-filters"' in frame


def test_a_proposed_note_waits_on_the_page_and_edit_saves_it_changed_with_its_conversation_as_source(
    client: Client,
) -> None:
    from agent.memory.notes import note_propose
    from agent.models import NoteProposal

    session = AgentSession.objects.create(actor="operator:alice", origin="ui", title="jellyfin")
    proposal = note_propose(
        NoteDraft(text="jellyfin's transcodes go to /mnt/scratch", entities=["service:jellyfin"]),
        proposed_by="operator:alice",
        session_id=session.pk,
        turn_id=None,
    )
    page = client.get("/ui/notes/").content.decode()
    assert "Proposed in conversations" in page and "/mnt/scratch" in page and Note.objects.count() == 0

    form = client.get(f"/ui/notes/?from_proposal={proposal.pk}").content.decode()
    assert "jellyfin&#x27;s transcodes go to /mnt/scratch</textarea>" in form
    assert f'name="from_proposal" value="{proposal.pk}"' in form

    saved = client.post(
        "/ui/notes/new/",
        {"text": "jellyfin's transcodes go to /mnt/scratch (an NVMe)", "entities": "service:jellyfin", "tags": ""}
        | {"from_proposal": str(proposal.pk)},
    )
    assert saved.status_code == 302
    note = Note.objects.get()
    assert note.text.endswith("(an NVMe)") and note.source_session_id == session.pk
    proposal.refresh_from_db()
    assert proposal.status == NoteProposal.Status.SAVED and proposal.note_id == note.pk

    # The proposal is decided: the same form again is refused, and no second note is made.
    again = client.post("/ui/notes/new/", {"text": "again", "from_proposal": str(proposal.pk)})
    assert again.status_code == 400 and "Already saved" in again.content.decode()
    assert Note.objects.count() == 1
