"""Sessions: resuming one from the nav, asking from the chat drawer on another page."""

from __future__ import annotations

import re

import httpx2
import pytest
from playwright.sync_api import expect

from tests.controlroom.browser.conftest import Stack, Watched
from tests.controlroom.browser.steps import SESSION_URL, ask, composer, last_turn, wait_done

pytestmark = pytest.mark.e2e


def test_a_past_session_resumes_from_the_nav(page: Watched) -> None:
    browser_page = page.page
    browser_page.goto("/ui/")
    # Shift+Enter writes a new line and sends nothing.
    field = composer(browser_page)
    field.fill("line one")
    field.press("Shift+Enter")
    field.press_sequentially("line two")
    expect(field).to_have_value("line one\nline two")
    expect(browser_page.locator(".transcript-empty")).to_be_visible()
    ask(browser_page, "remember the lighthouse keeper")
    expect(browser_page).to_have_url(SESSION_URL)
    session_url = browser_page.url
    wait_done(last_turn(browser_page))

    browser_page.get_by_role("link", name="New chat").click()
    expect(browser_page.locator(".transcript-empty")).to_be_visible()
    browser_page.get_by_role("searchbox", name="Search sessions").fill("lighthouse")
    match = browser_page.locator("#session-list a", has_text="remember the lighthouse keeper")
    expect(match).to_have_count(1)
    expect(browser_page.locator("#session-list a")).to_have_count(1)
    match.click()

    expect(browser_page).to_have_url(session_url)
    turn = last_turn(browser_page)
    expect(turn.locator(".text.md")).to_have_text("You said: remember the lighthouse keeper")

    # The resumed session takes the next question, with its history.
    ask(browser_page, "and the lamp?")
    following = last_turn(browser_page)
    wait_done(following)
    expect(following.locator(".text.md")).to_have_text("You said: and the lamp?")
    expect(browser_page.locator(".transcript article.turn")).to_have_count(2)
    page.assert_clean()


def test_the_chat_drawer_asks_from_the_ledger_page(page: Watched) -> None:
    browser_page = page.page
    browser_page.goto("/ui/ledger/")
    drawer = browser_page.locator("details.drawer")
    drawer.locator("summary").click()

    ask(drawer, "hello from the ledger")

    turn = last_turn(drawer)
    wait_done(turn)
    expect(turn.locator(".text.md")).to_have_text("You said: hello from the ledger")
    expect(browser_page).to_have_url(re.compile(r"/ui/ledger/$"))

    # The drawer keeps its conversation across pages, and can start a new one.
    browser_page.goto("/ui/sessions/")
    drawer.locator("summary").click()
    expect(last_turn(drawer).locator(".question")).to_contain_text("hello from the ledger")
    drawer.get_by_role("button", name="New chat").click()
    expect(drawer.locator(".conversation-title")).to_have_text("New chat")
    ask(drawer, "a fresh drawer chat")
    wait_done(last_turn(drawer))
    expect(drawer.locator("article.turn")).to_have_count(1)
    expect(last_turn(drawer).locator(".text.md")).to_have_text("You said: a fresh drawer chat")
    page.assert_clean()


def test_a_session_a_script_starts_appears_in_the_nav_without_losing_the_search(page: Watched, stack: Stack) -> None:
    browser_page = page.page
    browser_page.goto("/ui/")
    expect(browser_page.locator("#rail .rail-health")).to_be_visible()  # the socket is live

    # A script asks over the HTTP API: its new session shows in the open page's nav.
    first = httpx2.post(f"{stack.url}/chat", json={"message": "nightly backup report from cron"}, timeout=30)
    assert first.status_code == 200
    expect(browser_page.locator("#session-list a", has_text="nightly backup report from cron")).to_have_count(1)

    # While the operator searches, a refresh keeps the search: a non-matching session stays out.
    browser_page.get_by_role("searchbox", name="Search sessions").fill("lighthouse-that-never-was")
    expect(browser_page.locator("#session-list")).to_contain_text("No session matches.")
    browser_page.evaluate("document.querySelector('#session-list').dataset.before = 'refresh'")
    second = httpx2.post(f"{stack.url}/chat", json={"message": "weekly disk report from cron"}, timeout=30)
    assert second.status_code == 200
    expect(browser_page.locator("#session-list[data-before]")).to_have_count(0)  # the list was fetched again
    expect(browser_page.locator("#session-list")).to_contain_text("No session matches.")

    browser_page.get_by_role("searchbox", name="Search sessions").fill("from cron")
    expect(browser_page.locator("#session-list a")).to_have_count(2)
    page.assert_clean()


def test_a_question_sent_from_a_composer_htmx_has_not_wired_yet_stays_in_the_page(page: Watched) -> None:
    """htmx wires swapped-in content as it settles (20 ms after a swap, e.g. New chat); Enter in that
    window must still send the question through htmx, not post a plain form and leave the page."""
    browser_page = page.page
    browser_page.goto("/ui/ledger/")
    drawer = browser_page.locator("details.drawer")
    drawer.locator("summary").click()
    # A copy of the composer carries its attributes but none of htmx's wiring: the state in that window.
    browser_page.evaluate(
        "() => { const form = document.querySelector('details.drawer form.composer');"
        " form.replaceWith(form.cloneNode(true)); }"
    )

    ask(drawer, "asked at once")

    wait_done(last_turn(drawer))
    expect(last_turn(drawer).locator(".text.md")).to_have_text("You said: asked at once")
    expect(browser_page).to_have_url(re.compile(r"/ui/ledger/$"))
    page.assert_clean()
