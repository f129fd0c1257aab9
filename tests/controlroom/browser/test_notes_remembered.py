"""Must show (notes): "remember that …" in the chat becomes a proposal card, saved with one click
(nothing is saved before it) or dismissed; a turn given a note shows it, links it, and its export
lists it."""

from __future__ import annotations

import json
import re
import uuid

import pytest
from playwright.sync_api import Browser, expect

from tests.controlroom.browser.conftest import Stack, Watched
from tests.controlroom.browser.steps import SESSION_URL, ask, last_turn, wait_done
from tests.controlroom.browser.test_phone_layout import INNER_SCROLLERS, _phone
from tests.fakes.daphne import LiveDatabase
from tests.fakes.operator_models import REMEMBER_ANSWER
from tests.fakes.scripted_models import system_text

pytestmark = pytest.mark.e2e


def _notes_with(database: LiveDatabase, words: str, *, session_id: str | None = None) -> list[tuple[object, ...]]:
    """The notes holding `words` (from `session_id` only, when given: the live database is shared by
    every browser test, and others may have saved the same words)."""
    rows = database.query(
        "SELECT id, author, source_session_id, entities FROM agent_notes WHERE text LIKE %s", (f"%{words}%",)
    )
    if session_id is None:
        return rows
    return [row for row in rows if row[2] is not None and str(uuid.UUID(str(row[2]))) == session_id]


def _proposal(database: LiveDatabase, session_id: str) -> tuple[object, ...]:
    rows = database.query(
        "SELECT id, status, decided_by, note_id FROM agent_note_proposals WHERE session_id = %s",
        (database.uuid(session_id),),
    )
    assert len(rows) == 1, rows
    return rows[0]


def test_remember_that_proposes_a_card_and_one_click_on_save_makes_the_note(page: Watched, stack: Stack) -> None:
    database = LiveDatabase(stack.database_url)
    home = page.page
    home.goto("/ui/")
    home.evaluate("window.__sameDocument = true")

    ask(home, "remember that jellyfin's transcodes go to /mnt/scratch")

    expect(home).to_have_url(SESSION_URL)
    session_id = home.url.rstrip("/").rsplit("/", 1)[-1]
    turn = last_turn(home)
    wait_done(turn)
    expect(turn.locator(".text.md")).to_contain_text(REMEMBER_ANSWER)
    # The card reaches the chat (on the remember chip) and the rail, live.
    inline = turn.locator(".card.note-proposal")
    expect(inline).to_be_visible()
    expect(inline).to_have_attribute("data-status", "pending")
    expect(inline.locator(".card-note")).to_contain_text("/mnt/scratch")
    expect(inline.locator(".card-scope")).to_contain_text("service:jellyfin")
    proposal_id = inline.get_attribute("data-proposal")
    rail = home.locator(f"#note-proposals .note-proposal-{proposal_id}")
    expect(rail).to_be_visible()
    expect(rail.locator(".card-ids a")).to_have_attribute("href", re.compile(rf"/ui/s/{session_id}/#turn-"))
    # Proposed is not saved: no note exists before the click.
    assert _notes_with(database, "/mnt/scratch", session_id=session_id) == []
    assert _proposal(database, session_id)[1] == "pending"

    rail.get_by_role("button", name="Save").click()

    expect(inline).to_have_attribute("data-status", "saved")
    expect(inline.locator(".card-stage")).to_contain_text("Saved by operator as [note")
    ((note_id, author, source_session, entities),) = _notes_with(database, "/mnt/scratch", session_id=session_id)
    assert author == "operator" and str(uuid.UUID(str(source_session))) == session_id
    assert (json.loads(entities) if isinstance(entities, str) else entities) == ["service:jellyfin"]
    assert _proposal(database, session_id)[1:] == ("saved", "operator", note_id)
    expect(inline.locator(".card-stage a.note-link")).to_have_attribute("href", f"/ui/notes/{note_id}/")
    assert home.evaluate("window.__sameDocument") is True, "the page was reloaded"

    # A second click from a page drawn before the decision: exactly one decision won, and it says whose.
    stale = page.page.context.new_page()
    stale.goto(home.url)
    stale_card = stale.locator(".transcript .card.note-proposal")
    expect(stale_card).to_have_attribute("data-status", "saved")
    expect(stale_card.get_by_role("button", name="Save")).to_have_count(0)
    stale.close()
    assert len(_notes_with(database, "/mnt/scratch", session_id=session_id)) == 1
    page.assert_clean()


def test_dismiss_saves_nothing_and_says_who_dismissed(page: Watched, stack: Stack) -> None:
    database = LiveDatabase(stack.database_url)
    home = page.page
    home.goto("/ui/")

    ask(home, "remember that caddy's certificates live in /srv/caddy-dismissed")

    expect(home).to_have_url(SESSION_URL)
    session_id = home.url.rstrip("/").rsplit("/", 1)[-1]
    turn = last_turn(home)
    inline = turn.locator(".card.note-proposal")
    expect(inline).to_have_attribute("data-status", "pending")

    inline.get_by_role("button", name="Dismiss").click()

    expect(inline).to_have_attribute("data-status", "dismissed")
    expect(inline.locator(".card-stage")).to_contain_text("Dismissed by operator: nothing was saved")
    assert _proposal(database, session_id)[1:3] == ("dismissed", "operator")
    assert _notes_with(database, "/srv/caddy-dismissed") == []
    # Reloaded, the chip still says what came of it.
    home.reload()
    expect(last_turn(home).locator(".card.note-proposal")).to_have_attribute("data-status", "dismissed")
    page.assert_clean()


def test_a_turn_given_a_note_shows_it_links_its_citation_and_the_export_lists_it(page: Watched, stack: Stack) -> None:
    database = LiveDatabase(stack.database_url)
    text = "Sonarr indexer timeouts\n\nThey clear with a restart of sonarr; never touch prowlarr."
    moment = "2026-12-01 10:00:00"
    database.query(
        "INSERT INTO agent_notes (text, entities, tags, runbook, active, author, updated_by, created_at, updated_at)"
        " VALUES (%s, %s, %s, %s, %s, %s, '', %s, %s)",
        (text, json.dumps(["service:sonarr"]), json.dumps([]), True, True, "alice", moment, moment),
    )
    ((note_id,),) = database.query("SELECT id FROM agent_notes WHERE text = %s", (text,))
    try:
        home = page.page
        home.goto("/ui/")
        home.evaluate("window.__sameDocument = true")
        seen = len(stack.model.requests)

        ask(home, "sonarr's indexer keeps timing out, what now?")

        expect(home).to_have_url(SESSION_URL)
        turn = last_turn(home)
        wait_done(turn)
        # The model was given the note (as the fake recorded the request) ...
        asked = [r.body for r in stack.model.requests[seen:] if "sonarr" in json.dumps(r.body.get("messages"))]
        system = system_text(asked[0]) if asked else ""
        assert f"[note {note_id}]" in system and "never touch prowlarr" in system
        # ... the turn says so, live, linking it, and the answer's citation is a link to it.
        given = turn.locator(".notes-given")
        expect(given).to_contain_text(f"[note {note_id}] Sonarr indexer timeouts (runbook)")
        expect(given.locator(f'a.note-link[href="/ui/notes/{note_id}/"]')).to_have_count(1)
        # (Other tests' notes on sonarr may be cited too: the live database is shared.)
        cited = turn.locator(f'.text.md a.note-link[href="/ui/notes/{note_id}/"]')
        expect(cited).to_have_text(f"[note {note_id}]")
        assert home.evaluate("window.__sameDocument") is True, "the page was reloaded"
        home.reload()
        expect(last_turn(home).locator(f'.notes-given a.note-link[href="/ui/notes/{note_id}/"]')).to_have_count(1)

        session_id = home.url.rstrip("/").rsplit("/", 1)[-1]
        exported = home.request.get(f"/sessions/{session_id}/export.json")
        assert exported.ok, exported.text()
        (fact,) = exported.json()["turns"]
        # Runbooks first; other tests' notes on sonarr may follow (the live database is shared).
        assert fact["notes_given"][0] == {"id": note_id, "title": "Sonarr indexer timeouts", "runbook": True}
        note = home.request.get(f"/sessions/{session_id}/export.md").text()
        assert f"**Notes given:** \\[note {note_id}\\] Sonarr indexer timeouts (runbook)" in note
        page.assert_clean()
    finally:
        # The stack is shared: later tests about sonarr are not given this note.
        database.query("UPDATE agent_notes SET active = %s WHERE id = %s", (False, note_id))


def test_on_a_phone_the_proposal_sits_with_the_approvals_above_the_chat(browser: Browser, stack: Stack) -> None:
    database = LiveDatabase(stack.database_url)
    phone = _phone(browser, stack)
    home = phone.page
    home.goto("/ui/")

    ask(home, "remember that nextcloud's data lives on /tank/nextcloud-phone")

    expect(home).to_have_url(SESSION_URL)
    wait_done(last_turn(home))
    card = home.locator("#note-proposals .card.note-proposal", has_text="/tank/nextcloud-phone")
    expect(card).to_be_visible()
    card_box, chat_box = card.bounding_box(), home.locator("#conversation").bounding_box()
    assert card_box is not None and chat_box is not None
    # First, with what waits for the operator: above the conversation, not below the fleet.
    assert card_box["y"] + card_box["height"] <= chat_box["y"], (card_box, chat_box)
    assert card.evaluate(INNER_SCROLLERS) == []
    card.get_by_role("button", name="Save").click()
    expect(card).to_have_attribute("data-status", "saved")
    assert len(_notes_with(database, "/tank/nextcloud-phone")) == 1
    phone.assert_clean()
    home.context.close()
