"""Model text, tool arguments and tool results are data: nothing in them runs or fires a request."""

from __future__ import annotations

import pytest
from playwright.sync_api import Request, expect

from tests.controlroom.browser.conftest import Watched
from tests.controlroom.browser.steps import ask, last_turn, wait_done
from tests.fakes.operator_models import HOSTILE_SLUG

pytestmark = pytest.mark.e2e


def test_hostile_model_output_and_tool_data_render_inert(page: Watched) -> None:
    browser_page = page.page
    requests: list[str] = []

    def record(request: Request) -> None:
        requests.append(request.url)

    browser_page.on("request", record)
    browser_page.goto("/ui/")

    ask(browser_page, "say something hostile")

    turn = last_turn(browser_page)
    wait_done(turn)
    answer = turn.locator(".text.md")
    # Shown as text, not as markup: the payloads are visible words on the page.
    expect(answer).to_contain_text("<script>window.__pwned = 'script'</script>")
    expect(answer).to_contain_text('<img src="/ui/pwned-img"')
    expect(answer).to_contain_text('<button hx-get="/ui/pwned-htmx" hx-trigger="load">')
    # Markdown itself still renders, but a javascript: link does not become a link.
    expect(answer.locator("strong")).to_have_text("Bold still works.")
    expect(browser_page.locator("a[href^='javascript']")).to_have_count(0)
    expect(answer.locator("script, img, button, [hx-get], [onerror]")).to_have_count(0)

    chip = turn.locator("details.chip")
    chip.locator("summary").click()
    expect(chip.locator(".chip-args")).to_contain_text(HOSTILE_SLUG.replace('"', '\\"'))
    expect(chip.locator(".chip-result")).to_contain_text("<img")
    expect(chip.locator("img")).to_have_count(0)
    # The model's crafted tool-call id is not an element id (it is hashed).
    assert browser_page.locator("[id*='onmouseover'], [id*='toolu_x']").count() == 0

    # The rail was not taken over by the hx-swap-oob in the answer.
    expect(browser_page.locator("#rail")).not_to_contain_text("owned")
    expect(browser_page.locator("#rail .rail-health")).to_be_visible()

    assert browser_page.evaluate("window.__pwned") is None
    fired = [url for url in requests if "pwned" in url]
    assert not fired, fired
    page.assert_clean()
