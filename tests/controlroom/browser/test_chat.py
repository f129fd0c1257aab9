"""The chat in a real browser: streaming, tool chips, Markdown, the ledger link, screenshots."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.controlroom.browser.conftest import ARTIFACTS, Stack, Watched
from tests.controlroom.browser.steps import SESSION_URL, STREAM_RECORDER, ask, last_turn, wait_done

pytestmark = pytest.mark.e2e


def test_whats_degraded_streams_two_chips_then_markdown_and_links_the_ledger(page: Watched, stack: Stack) -> None:
    browser_page = page.page
    browser_page.goto("/ui/")
    browser_page.evaluate(STREAM_RECORDER)

    ask(browser_page, "what's degraded and what depends on it?")

    # A new session: the address becomes the session's, without a page load.
    expect(browser_page).to_have_url(SESSION_URL)
    turn = last_turn(browser_page)
    wait_done(turn)

    # For review: the finished answer at desktop and phone width.
    ARTIFACTS.mkdir(exist_ok=True)
    browser_page.screenshot(path=str(ARTIFACTS / "home-desktop.png"), full_page=True)
    browser_page.set_viewport_size({"width": 390, "height": 844})
    expect(browser_page.locator("form.composer textarea")).to_be_visible()
    browser_page.screenshot(path=str(ARTIFACTS / "home-phone.png"), full_page=True)
    browser_page.set_viewport_size({"width": 1280, "height": 860})

    chips = turn.locator("details.chip")
    expect(chips).to_have_count(2)
    expect(chips.nth(0).locator(".chip-tool")).to_have_text("get_health_summary")
    expect(chips.nth(1).locator(".chip-tool")).to_have_text("get_blast_radius")
    expect(chips.nth(1).locator(".chip-server")).to_have_text("oikos")
    expect(chips.nth(1)).to_have_class(re.compile(r"\bchip-ok\b"))
    # Expanded, a chip shows the arguments the model sent and what the tool answered.
    chips.nth(1).locator(":scope > summary").click()
    expect(chips.nth(1).locator(".chip-args")).to_contain_text('"slug": "service:postgres"')
    expect(chips.nth(1).locator(".chip-result")).to_contain_text("service:authentik")
    chips.nth(0).locator(":scope > summary").click()
    expect(chips.nth(0).locator(".chip-result")).to_contain_text("degraded")

    # The text grew in several steps while streaming, then became rendered Markdown.
    lengths = sorted(set(browser_page.evaluate("window.__streamLengths")))
    answer = turn.locator(".text.md")
    expect(answer.locator("strong")).to_have_text("service:postgres")
    final_length = len(answer.inner_text())
    assert len([n for n in lengths if 0 < n < final_length]) >= 2, lengths
    expect(answer.locator("li code").first).to_be_visible()
    expect(turn.locator(".text.streaming")).to_have_count(0)
    # Usage of the turn is shown with its correlation id.
    expect(turn.locator(".turn-foot .usage")).to_contain_text(" in · ")

    # The correlation id opens the ledger filtered to exactly this turn's calls.
    correlation = turn.locator(".turn-foot a.correlation")
    turn_id = correlation.inner_text().strip()
    correlation.click()
    expect(browser_page).to_have_url(re.compile(rf"/ui/ledger/\?turn={turn_id}$"))
    rows = browser_page.locator("table.ledger tbody tr.ledger-row")
    expect(rows).to_have_count(2)
    expect(rows.nth(0).locator(".chip-tool")).to_have_text("get_blast_radius")
    expect(rows.nth(1).locator(".chip-tool")).to_have_text("get_health_summary")
    page.assert_clean()
