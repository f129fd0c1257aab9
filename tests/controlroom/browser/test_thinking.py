"""Thinking and the model selector in a real browser."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.controlroom.browser.conftest import Stack, Watched
from tests.controlroom.browser.steps import SESSION_URL, ask, last_turn, wait_done
from tests.fakes.operator_models import THINKER_ANSWER, THINKING_FIRST, THINKING_SECOND

pytestmark = pytest.mark.e2e

# Records every length a streaming thinking element's text takes, and whether it was open then.
THINKING_RECORDER = """
() => {
  window.__thinking = [];
  new MutationObserver(() => {
    for (const element of document.querySelectorAll('.transcript details.thinking-streaming')) {
      window.__thinking.push([element.querySelector('.thinking-text').textContent.length, element.open]);
    }
  }).observe(document.body, {subtree: true, childList: true, characterData: true});
}
"""


def test_thinking_streams_live_into_collapsed_elements_before_what_it_led_to(page: Watched, stack: Stack) -> None:
    browser_page = page.page
    browser_page.goto("/ui/")
    # A session whose page is already following it, so the thinking is watched from its first piece.
    ask(browser_page, "hello")
    expect(browser_page).to_have_url(SESSION_URL)
    wait_done(last_turn(browser_page))
    browser_page.evaluate(THINKING_RECORDER)

    ask(browser_page, "think it through: which service is unwell?")
    expect(browser_page.locator("article.turn")).to_have_count(2)
    turn = last_turn(browser_page)
    wait_done(turn)

    # Streamed live: the first thinking element grew in several steps, collapsed all along.
    seen = browser_page.evaluate("window.__thinking")
    lengths = sorted({length for length, _open in seen})
    assert len([n for n in lengths if 0 < n < len(THINKING_FIRST)]) >= 2, lengths
    assert not any(opened for _length, opened in seen)

    thoughts = turn.locator("details.thinking")
    expect(thoughts).to_have_count(2)
    for index in range(2):
        expect(thoughts.nth(index)).not_to_have_attribute("open", "")
        expect(thoughts.nth(index).locator(".thinking-text")).to_be_hidden()
    # In order: thinking, the tool call it led to, thinking, the answer.
    kinds = turn.locator(".turn-body > *").evaluate_all(
        "elements => elements.map(e => e.classList.contains('thinking') ? 'thinking' : e.classList[0])"
    )
    assert kinds == ["thinking", "chip", "thinking", "text"], kinds
    expect(turn.locator(".text.md strong")).to_have_text("postgres")
    assert THINKER_ANSWER.split("**")[0] in turn.locator(".text.md").inner_text()

    # Opened, it reads as plain text (model text is never markup).
    thoughts.nth(0).locator("summary").click()
    expect(thoughts.nth(0).locator(".thinking-text")).to_have_text(THINKING_FIRST)
    expect(thoughts.nth(0).locator(".thinking-text b")).to_have_count(0)

    # After a reload it comes from the database, collapsed again.
    browser_page.reload()
    stored = last_turn(browser_page).locator("details.thinking")
    expect(stored).to_have_count(2)
    expect(stored.nth(1)).not_to_have_attribute("open", "")
    stored.nth(1).locator("summary").click()
    expect(stored.nth(1).locator(".thinking-text")).to_have_text(THINKING_SECOND)
    page.assert_clean()


def test_the_model_picked_answers_from_the_next_question_and_is_shown_with_the_usage(
    page: Watched, stack: Stack
) -> None:
    browser_page = page.page
    browser_page.goto("/ui/")
    turns = browser_page.locator(".transcript article.turn")
    picker = browser_page.locator("form.composer select[name=model]")
    expect(picker).to_have_value("claude-sonnet-5")

    def asked(question: str, count: int) -> None:
        ask(browser_page, question)
        expect(turns).to_have_count(count)
        wait_done(last_turn(browser_page))

    asked("hello from sonnet", 1)
    expect(browser_page).to_have_url(SESSION_URL)
    expect(last_turn(browser_page).locator(".turn-foot .model")).to_have_text("claude-sonnet-5")

    picker.select_option("claude-opus-5")
    asked("hello from opus", 2)
    expect(last_turn(browser_page).locator(".turn-foot .model")).to_have_text("claude-opus-5")
    expect(last_turn(browser_page).locator(".turn-foot .usage")).to_contain_text(" in · ")
    # The session remembers it: the selector shows it, and the next question goes to it too.
    expect(picker).to_have_value("claude-opus-5")
    asked("and again", 3)
    expect(last_turn(browser_page).locator(".turn-foot .model")).to_have_text("claude-opus-5")

    models = [request.body["model"] for request in stack.model.requests[-3:]]
    assert models == ["claude-sonnet-5", "claude-opus-5", "claude-opus-5"]
    page.assert_clean()
