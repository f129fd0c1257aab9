"""Notes in a real browser: an operator writes one on the Notes page, and the next session's
question about that service carries it to the model, cited by number."""

from __future__ import annotations

import json
import re

import httpx2
import pytest
from playwright.sync_api import expect

from tests.controlroom.browser.conftest import Stack, Watched
from tests.controlroom.browser.steps import SESSION_URL, ask, last_turn, wait_done
from tests.fakes.daphne import LiveDatabase

pytestmark = pytest.mark.e2e

NOTE_TEXT = "Sonarr's indexer timeouts clear with a restart of sonarr; never touch prowlarr for them."
QUESTION = "anything I should know about sonarr before I dig in?"


def test_a_note_saved_on_the_notes_page_is_given_to_the_next_session_and_cited(page: Watched, stack: Stack) -> None:
    browser_page = page.page
    browser_page.goto("/ui/notes/")
    browser_page.get_by_label("Text (Markdown").fill(NOTE_TEXT)
    browser_page.get_by_role("textbox", name="Entities").fill("service:sonarr")
    browser_page.get_by_role("button", name="Save note").click()

    expect(browser_page).to_have_url(re.compile(r"/ui/notes/\d+/$"))
    number = int(browser_page.url.rstrip("/").rsplit("/", 1)[1])
    expect(browser_page.locator("main.page h1")).to_contain_text(f"[note {number}]")
    expect(browser_page.locator(".note-scope .note-entity")).to_have_text("service:sonarr")

    browser_page.goto("/ui/")
    ask(browser_page, QUESTION)
    expect(browser_page).to_have_url(SESSION_URL)
    session_id = browser_page.url.rstrip("/").rsplit("/", 1)[1]
    wait_done(last_turn(browser_page))

    # The request to the model, as the fake recorded it: the note, and how to cite it.
    asked = [request for request in stack.model.requests if QUESTION in json.dumps(request.body)]
    assert asked, "the model was never asked the question"
    system = json.dumps(asked[0].body["system"])
    assert json.dumps(NOTE_TEXT)[1:-1] in system and f"[note {number}]" in system

    database = LiveDatabase(stack.database_url)
    rows = database.query("SELECT notes_given FROM agent_turns WHERE session_id = %s", (database.uuid(session_id),))
    given = [json.loads(raw) if isinstance(raw, str) else raw for (raw,) in rows]
    assert [[entry["id"] for entry in turn] for turn in given] == [[number]]
    # The stack is shared: later tests about sonarr are not given this note.
    database.query("UPDATE agent_notes SET active = %s WHERE id = %s", (False, number))

    # The transcript shows the note as used, linked to its page — live, then after a reload.
    used = last_turn(browser_page).locator(".notes-given a.note-link")
    expect(used).to_have_text(f"[note {number}]")
    expect(used).to_have_attribute("href", f"/ui/notes/{number}/")
    browser_page.reload()
    expect(last_turn(browser_page).locator(".notes-given a.note-link")).to_have_text(f"[note {number}]")
    page.assert_clean()


def test_the_open_notes_page_shows_a_note_saved_elsewhere_without_a_reload(page: Watched, stack: Stack) -> None:
    browser_page = page.page
    browser_page.goto("/ui/notes/")
    # The page's socket is open once its snapshot swapped the refresh element in.
    expect(browser_page.locator("#note-refresh")).to_have_attribute("hx-get", "/ui/notes/list/")

    answer = httpx2.post(
        f"{stack.url}/notes",
        json={"text": "Jellyfin transcodes go to /mnt/scratch", "entities": ["service:jellyfin"]},
        timeout=10,
    )
    assert answer.status_code == 201

    row = browser_page.locator(f'.note-row[data-note="{answer.json()["id"]}"]')
    expect(row).to_contain_text("Jellyfin transcodes go to /mnt/scratch")
    page.assert_clean()
