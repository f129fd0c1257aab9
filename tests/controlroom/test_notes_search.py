"""The control room's search finds operators' notes by their words, linked to the note's page, with
the index's query syntax; what is written or changed is found as it is now."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from agent.memory.notes import NoteDraft, note_create, note_update
from agent.search.notes import notes_search

pytestmark = pytest.mark.django_db(transaction=True)


def _found(page: str) -> list[int]:
    return [int(number) for number in re.findall(r'href="/ui/notes/(\d+)/"', page)]


def test_a_search_finds_a_note_by_its_words_and_links_its_page(client: Client) -> None:
    sonarr = note_create(
        NoteDraft(text="Sonarr's indexer timeouts clear with a restart", entities=["service:sonarr"]),
        author="operator:alice",
    )
    note_create(NoteDraft(text="Collabora after a nextcloud upgrade"), author="operator:alice")

    page = client.get("/ui/search/", {"q": "indexer restart"}).content.decode()

    assert _found(page) == [sonarr.pk]
    assert "<mark>indexer</mark>" in page and f"[note {sonarr.pk}]" in page


def test_an_edited_note_is_found_by_its_new_words_only(client: Client) -> None:
    note = note_create(NoteDraft(text="Jellyfin transcodes go to /mnt/scratch"), author="operator:alice")
    note_update(note.pk, NoteDraft(text="Jellyfin transcodes go to /mnt/fast"), by="operator:bob")

    assert _found(client.get("/ui/search/", {"q": "fast"}).content.decode()) == [note.pk]
    assert _found(client.get("/ui/search/", {"q": "scratch"}).content.decode()) == []


def test_phrases_exclusions_scope_and_escaping() -> None:
    hostile = note_create(
        NoteDraft(text='caddy <img src=x onerror="alert(1)"> reloads', tags=["proxy"]), author="operator:a"
    )
    note_create(NoteDraft(text="caddy restarts drop websockets", entities=["service:caddy"]), author="operator:a")

    assert [hit.note.pk for hit in notes_search('"caddy reloads"')] == []
    assert [hit.note.pk for hit in notes_search("caddy -websockets")] == [hostile.pk]
    assert [hit.note.pk for hit in notes_search("#proxy")] == [hostile.pk]  # tags are searched too
    snippet = str(notes_search("reloads")[0].snippet)
    assert "<img" not in snippet and "<mark>reloads</mark>" in snippet
