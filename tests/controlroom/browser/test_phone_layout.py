"""The control room on a phone (390 px wide): one page that scrolls, what waits for the operator first.

At this width nothing may scroll on its own: a box that does is a thin strip on a phone, and the
operator cannot reach what is in it. An approval raised in oikos_sim is decided from the phone. A
new investigation's notice, on a phone and on a desktop, never lies over the approvals.
"""

from __future__ import annotations

from pathlib import Path

import httpx2
import pytest
from playwright.sync_api import Browser, FloatRect, Locator, ViewportSize, expect

from oikos_sim.auth import DEFAULT_TOKENS
from oikos_sim.pulse import signal_fire
from tests.controlroom.browser.conftest import ARTIFACTS, Stack, Watched, watch
from tests.controlroom.browser.steps import ask, last_turn, wait_done
from tests.fakes.watchers import WatchProcess

pytestmark = pytest.mark.e2e

PHONE: ViewportSize = {"width": 390, "height": 844}

# The ancestors of an element that clip it and scroll on their own (the page itself excluded).
INNER_SCROLLERS = """
element => {
  const found = [];
  for (let node = element.parentElement; node && node !== document.body; node = node.parentElement) {
    const overflow = getComputedStyle(node).overflowY;
    if (["auto", "scroll", "hidden"].includes(overflow) && node.scrollHeight > node.clientHeight + 1) {
      found.push(`${node.tagName.toLowerCase()}#${node.id}.${node.className} (${overflow})`);
    }
  }
  return found;
}
"""

# Scrolls the page (only the page) so the element's top sits below the sticky jump strip.
PAGE_SCROLL_TO = "element => window.scrollTo(0, window.scrollY + element.getBoundingClientRect().top - 80)"


def _phone(browser: Browser, stack: Stack) -> Watched:
    context = browser.new_context(
        viewport=PHONE, device_scale_factor=2, is_mobile=True, has_touch=True, base_url=stack.url, color_scheme="dark"
    )
    context.set_default_timeout(10_000)
    return watch(context.new_page())


def _deploy_parked(stack: Stack, target: str) -> str:
    """Something asks Oikos for a deploy, which Oikos parks for an operator: its approval id."""
    created = httpx2.post(
        f"{stack.oikos.api_url}/executions",
        json={"target": target, "action": "deploy", "reason": "new release"},
        headers={"Authorization": f"Bearer {DEFAULT_TOKENS['service:hermes-controlroom']}"},
        timeout=10,
    )
    assert created.status_code == 201, created.text
    return str(created.json()["approval_id"])


def _in_viewport(element: Locator) -> bool:
    box = element.bounding_box()
    assert box is not None
    return box["y"] >= 0 and box["y"] + box["height"] <= PHONE["height"]


def _top(element: Locator) -> float:
    box = element.bounding_box()
    assert box is not None
    return box["y"]


def test_at_phone_width_the_page_scrolls_to_a_pending_approval_which_approves(browser: Browser, stack: Stack) -> None:
    approval_id = _deploy_parked(stack, "service:vaultwarden")
    phone = _phone(browser, stack)
    page = phone.page
    page.goto("/ui/")
    card = page.locator("#rail .card.approval", has=page.locator(f"code:text-is('{approval_id}')"))
    expect(card).to_have_attribute("data-stage", "pending")

    # One column, in the order an operator on the move needs it: approvals, the chat, the fleet, sessions.
    approvals = page.locator("#rail-approvals")
    conversation = page.locator("#conversation")
    fleet = page.locator("#rail-fleet")
    sessions = page.locator("#sessions")
    assert _top(approvals) < _top(conversation) < _top(fleet) < _top(sessions)
    for part in (approvals, conversation, fleet, sessions):
        box = part.bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"] + 1
    # The page scrolls, and nothing inside it does.
    assert page.evaluate("document.scrollingElement.scrollHeight > window.innerHeight")
    for selector in ("#sessions .session-list", "#transcript", "#rail-fleet", "#rail-approval-list"):
        assert page.locator(selector).evaluate(INNER_SCROLLERS) == [], selector
    # The jump strip says an approval waits.
    jump = page.locator("nav.jump .jump-approvals")
    assert "●" in jump.evaluate("link => getComputedStyle(link, '::after').content")

    approve = card.get_by_role("button", name="Approve")
    assert approve.evaluate(INNER_SCROLLERS) == []
    approve.evaluate(PAGE_SCROLL_TO)
    assert _in_viewport(approve)
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "phone-approval.png"))
    approve.click()

    expect(card).to_have_attribute("data-stage", "completed", timeout=8_000)
    expect(card.locator(".card-stage")).to_contain_text("approved by operator")

    # The sessions are a tap away, and so is the fleet.
    page.locator("nav.jump").get_by_role("link", name="Sessions").click()
    expect(sessions.locator(".new-chat")).to_be_in_viewport()
    page.locator("nav.jump").get_by_role("link", name="Fleet").click()
    expect(fleet.locator(".health-counts")).to_be_in_viewport()
    phone.assert_clean()
    page.context.close()


def test_at_phone_width_the_composer_asks_and_the_answer_shows(browser: Browser, stack: Stack) -> None:
    phone = _phone(browser, stack)
    page = phone.page
    page.goto("/ui/")
    page.locator("nav.jump").get_by_role("link", name="Chat").click()
    field = page.locator("form.composer textarea")
    expect(field).to_be_in_viewport()
    box = field.bounding_box()
    assert box is not None and box["width"] > PHONE["width"] / 2

    ask(page, "what is degraded?")

    turn = last_turn(page)
    wait_done(turn)
    expect(turn.locator(".text.md")).not_to_be_empty()
    # The box stays in reach under the answer: sticky at the bottom of the screen while the chat shows.
    turn.evaluate(PAGE_SCROLL_TO)
    expect(page.locator("form.composer textarea")).to_be_in_viewport()
    page.screenshot(path=str(ARTIFACTS / "phone-chat.png"), full_page=True)
    phone.assert_clean()
    page.context.close()


def test_on_a_desktop_the_three_columns_stand_side_by_side_and_the_page_does_not_scroll(page: Watched) -> None:
    browser_page = page.page
    browser_page.goto("/ui/")
    expect(browser_page.locator("#rail .rail-health")).to_be_visible()
    sessions = browser_page.locator("#sessions").bounding_box()
    conversation = browser_page.locator("#conversation").bounding_box()
    rail = browser_page.locator("aside.rail").bounding_box()
    assert sessions and conversation and rail
    assert sessions["x"] < conversation["x"] < rail["x"]
    assert sessions["y"] == conversation["y"] == rail["y"]
    assert not browser_page.evaluate("document.scrollingElement.scrollHeight > window.innerHeight")
    expect(browser_page.locator("nav.jump")).to_be_hidden()
    page.assert_clean()


def _overlap(one: FloatRect | None, other: FloatRect | None) -> bool:
    assert one is not None and other is not None
    return not (
        one["x"] + one["width"] <= other["x"]
        or other["x"] + other["width"] <= one["x"]
        or one["y"] + one["height"] <= other["y"]
        or other["y"] + other["height"] <= one["y"]
    )


def test_a_new_investigations_notice_never_covers_the_approvals(
    page: Watched, browser: Browser, stack: Stack, tmp_path: Path
) -> None:
    _deploy_parked(stack, "service:grafana")
    desktop = page.page
    phone = _phone(browser, stack)
    # A watcher without a model: the investigation is opened and announced, then recorded as skipped
    # (no model call), so nothing of it is left running or in the model's log for later tests.
    no_model = {**stack.env, "ANTHROPIC_API_KEY": "", "ANTHROPIC_BASE_URL": ""}
    watcher = WatchProcess(no_model, log_path=tmp_path / "watch.log")
    try:
        for opened in (desktop, phone.page):
            with opened.expect_websocket() as socket:
                opened.goto("/ui/")
            socket.value.wait_for_event("framereceived")
            expect(opened.locator("#rail-approvals .card.approval").first).to_be_visible()

        signal_fire(
            stack.oikos.state.world,
            stack.oikos.state.events,
            "service:adguard",
            "dns_timeouts",
            "critical",
            "upstream DNS timing out",
        )

        for opened in (desktop, phone.page):
            notice = opened.locator("#notices .notice-investigation").first
            expect(notice).to_contain_text("dns_timeouts on service:adguard", timeout=15_000)
            expect(notice).to_be_in_viewport(ratio=1)
            rail = opened.locator("aside.rail") if opened is desktop else opened.locator("#rail-approvals")
            assert not _overlap(notice.bounding_box(), rail.bounding_box())
            for card in opened.locator("#rail-approvals .card.approval").all():
                assert not _overlap(notice.bounding_box(), card.bounding_box())
        phone.page.screenshot(path=str(ARTIFACTS / "phone-notice.png"))
        desktop.screenshot(path=str(ARTIFACTS / "desktop-notice.png"))
        # Recorded as skipped before its watcher stops (else the next watcher would take it up).
        listed = desktop.locator("#session-list li", has_text="dns_timeouts on service:adguard")
        expect(listed.locator(".badge-investigation")).to_contain_text("skipped", timeout=15_000)
        page.assert_clean()
        phone.assert_clean()
    finally:
        code = watcher.terminate()
        phone.page.context.close()
    assert code == 0, watcher.log()
