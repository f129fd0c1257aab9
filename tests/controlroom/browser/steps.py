"""What an operator does in the control room, as Playwright steps."""

from __future__ import annotations

import re
import time

from playwright.sync_api import Locator, Page, expect

SESSION_URL = re.compile(r"/ui/s/[0-9a-f-]{36}/$")

# Records every length the streaming text block takes, so a test can tell text grew in steps.
STREAM_RECORDER = """
() => {
  window.__streamLengths = [];
  new MutationObserver(() => {
    for (const block of document.querySelectorAll('.transcript .text.streaming')) {
      window.__streamLengths.push(block.textContent.length);
    }
  }).observe(document.body, {subtree: true, childList: true, characterData: true});
}
"""

# Records the stage of every approval card in the transcript each time the page changes.
STAGE_RECORDER = """
() => {
  window.__stages = [];
  new MutationObserver(() => {
    const card = document.querySelector('.transcript .card.approval');
    if (card) window.__stages.push(card.dataset.stage);
  }).observe(document.body, {subtree: true, childList: true, attributes: true});
}
"""


def composer(scope: Page | Locator) -> Locator:
    return scope.locator("form.composer textarea")


def ask(scope: Page | Locator, question: str) -> None:
    """Type a question and press Enter, as an operator does."""
    field = composer(scope)
    field.fill(question)
    field.press("Enter")


def last_turn(page: Page | Locator) -> Locator:
    return page.locator(".transcript article.turn").last


def wait_done(turn: Locator, *, timeout: float = 15_000) -> None:
    expect(turn.locator(".turn-foot .status")).to_be_visible(timeout=timeout)


def poll(condition: object, *, timeout: float = 10.0, interval: float = 0.1) -> None:
    """Wait for a condition checked outside the page (the server's database, the model's log)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if callable(condition) and condition():
            return
        time.sleep(interval)
    raise AssertionError("condition not met in time")
