"""Search from the nav and export a session, in a real browser: the find-it-later half of an incident."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.controlroom.browser.conftest import ARTIFACTS, Watched
from tests.controlroom.browser.steps import SESSION_URL, ask, last_turn, wait_done

pytestmark = pytest.mark.e2e


def test_a_word_only_in_a_tool_result_is_found_from_the_nav_and_opens_the_call(page: Watched) -> None:
    browser_page = page.page
    browser_page.goto("/ui/")
    ask(browser_page, "what's degraded and what depends on it?")
    expect(browser_page).to_have_url(SESSION_URL)
    session_url = browser_page.url
    wait_done(last_turn(browser_page))

    # oikos_sim's health summary says why postgres is degraded: WAL archiving to pbs has failed.
    search = browser_page.get_by_role("searchbox", name="Search questions, answers and tool calls of every session")
    search.fill("archiving pbs")
    search.press("Enter")

    hit = browser_page.locator(".search-hit", has_text="get_health_summary").first
    expect(hit.locator(".search-snippet mark").first).to_be_visible()
    ARTIFACTS.mkdir(exist_ok=True)
    browser_page.screenshot(path=str(ARTIFACTS / "search-results.png"), full_page=True)
    hit.locator("a.search-hit-link").click()

    # The link lands on the tool call's chip, opened, with the matched words marked in it.
    assert browser_page.url.startswith(session_url + "?hl=") and "#chip-" in browser_page.url
    chip_id = browser_page.url.split("#", 1)[1]
    chip = browser_page.locator(f"#{chip_id}")
    expect(chip).to_be_visible()
    expect(chip).to_have_attribute("open", "")
    expect(chip).to_have_class(re.compile(r"\bsearch-landed\b"))
    marks = chip.locator(".chip-detail mark.search-mark")
    expect(marks.filter(has_text=re.compile("^archiving$", re.IGNORECASE)).first).to_be_visible()
    expect(marks.filter(has_text=re.compile("^pbs$", re.IGNORECASE)).first).to_be_in_viewport()

    with browser_page.expect_download() as download:
        browser_page.get_by_role("link", name="Export note").click()
    assert download.value.suggested_filename.startswith("hermes-what-s-degraded-and-what-depends-on-it-")
    note = download.value.path().read_text(encoding="utf-8")
    assert "get_health_summary" in note and "what's degraded and what depends on it?" in note
    page.assert_clean()
