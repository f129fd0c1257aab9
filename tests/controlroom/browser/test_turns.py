"""Turns outlive pages: reload or close mid-answer, and Stop."""

from __future__ import annotations

import httpx2
import pytest
from playwright.sync_api import Browser, expect

from tests.controlroom.browser.conftest import Stack, Watched, watch
from tests.controlroom.browser.steps import SESSION_URL, ask, last_turn, poll, wait_done
from tests.fakes.operator_models import LONG_ANSWER, STOPPABLE_ANSWER

pytestmark = pytest.mark.e2e


def test_a_reload_mid_answer_shows_the_turn_so_far_and_it_finishes_live(page: Watched) -> None:
    browser_page = page.page
    browser_page.goto("/ui/")
    ask(browser_page, "give me the long status report")
    expect(browser_page).to_have_url(SESSION_URL)
    expect(last_turn(browser_page).locator(".text.streaming")).to_contain_text("Line 2:")

    browser_page.reload()

    turn = last_turn(browser_page)
    expect(turn.locator(".question")).to_contain_text("give me the long status report")
    expect(turn.locator(".text.streaming")).to_contain_text("Line 1:")
    wait_done(turn)
    # Nothing lost and nothing doubled across the reload.
    assert turn.locator(".text.md").inner_text().strip() == LONG_ANSWER
    expect(turn.locator(".turn-foot .status")).to_have_text("done")
    page.assert_clean()


def test_closing_mid_answer_leaves_the_turn_running_and_reopening_shows_it_finished(
    page: Watched, browser: Browser, stack: Stack
) -> None:
    browser_page = page.page
    browser_page.goto("/ui/")
    ask(browser_page, "another long status report")
    expect(browser_page).to_have_url(SESSION_URL)
    expect(last_turn(browser_page).locator(".text.streaming")).to_contain_text("Line 2:")
    session_url = browser_page.url
    browser_page.close()

    poll(lambda: "status-done" in httpx2.get(session_url, timeout=5).text, timeout=15)

    reopened = watch(browser.new_context(base_url=stack.url, color_scheme="dark").new_page())
    reopened.page.goto(session_url)
    turn = last_turn(reopened.page)
    expect(turn.locator(".turn-foot .status")).to_have_text("done")
    assert turn.locator(".text.md").inner_text().strip() == LONG_ANSWER
    reopened.assert_clean()
    reopened.page.context.close()


def test_stop_cancels_a_long_turn_keeps_the_partial_answer_and_the_next_question_works(page: Watched) -> None:
    browser_page = page.page
    browser_page.goto("/ui/")
    ask(browser_page, "a long report I will stop")
    turn = last_turn(browser_page)
    expect(turn.locator(".text.streaming")).to_contain_text("Line 2:")

    browser_page.locator("#turn-controls").get_by_role("button", name="Stop").click()

    expect(turn.locator(".turn-foot .status")).to_have_text("cancelled")
    expect(turn.locator(".notice")).to_contain_text("Stopped.")
    partial = turn.locator(".text.md").inner_text().strip()
    assert partial and STOPPABLE_ANSWER.startswith(partial) and len(partial) < len(STOPPABLE_ANSWER)
    expect(browser_page.locator("#turn-controls button")).to_have_count(0)

    ask(browser_page, "are you still there?")
    following = last_turn(browser_page)
    wait_done(following)
    expect(following.locator(".text.md")).to_have_text("You said: are you still there?")
    page.assert_clean()
