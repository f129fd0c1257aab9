"""The Changes page follows Hermes's record live: an operator restarts a service from the chat in
one tab, and the Changes page open in another lists it — who asked, in which session, how it
ended — without a reload."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from tests.controlroom.browser.conftest import ARTIFACTS, Stack, Watched, watch
from tests.controlroom.browser.steps import SESSION_URL, ask, last_turn, wait_done

pytestmark = pytest.mark.e2e


def _open_and_following(page: Page, path: str) -> None:
    """Open `path` and wait for its socket's first frame: from then on, its group's news reaches it."""
    with page.expect_websocket() as socket:
        page.goto(path)
    socket.value.wait_for_event("framereceived")


def test_a_change_made_in_the_chat_appears_on_the_open_changes_page(page: Watched, stack: Stack) -> None:
    listing = watch(page.page.context.new_page())
    _open_and_following(listing.page, "/ui/changes/?target=service%3Aradarr")
    rows = listing.page.locator("#change-list .change-row")
    before = rows.count()
    listing.page.evaluate("window.__sameDocument = true")

    page.page.goto("/ui/")
    ask(page.page, "restart radarr")
    expect(page.page).to_have_url(SESSION_URL)
    wait_done(last_turn(page.page))
    session_path = page.page.url.split(stack.url, 1)[-1]

    expect(rows).to_have_count(before + 1, timeout=15_000)
    newest = rows.first
    expect(newest.locator(".change-action")).to_have_text("restart")
    expect(newest.locator(".change-target")).to_have_text("service:radarr")
    expect(newest).to_contain_text("by operator:operator")
    link = newest.locator("a.change-session")
    assert (link.get_attribute("href") or "").startswith(f"{session_path}#turn-")
    assert listing.page.evaluate("window.__sameDocument") is True

    ARTIFACTS.mkdir(exist_ok=True)
    listing.page.screenshot(path=str(ARTIFACTS / "changes-page.png"), full_page=True)
    page.assert_clean()
    listing.assert_clean()
