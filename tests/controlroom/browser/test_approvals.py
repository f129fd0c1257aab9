"""Acting on the homelab from the control room: an auto-acted restart, a deploy behind approval."""

from __future__ import annotations

import re
import time

import httpx2
import pytest
from playwright.sync_api import Browser, WebSocketRoute, expect

from oikos_sim.auth import DEFAULT_TOKENS
from tests.controlroom.browser.conftest import Stack, Watched, watch
from tests.controlroom.browser.steps import SESSION_URL, STAGE_RECORDER, ask, last_turn, wait_done

pytestmark = pytest.mark.e2e


def test_restart_of_a_low_risk_target_shows_in_the_rail_until_completed(page: Watched) -> None:
    browser_page = page.page
    browser_page.goto("/ui/")
    expect(browser_page.locator("#rail .rail-health")).to_be_visible()

    ask(browser_page, "restart caddy")

    turn = last_turn(browser_page)
    expect(turn.locator("details.chip .chip-tool")).to_have_text("request_execution")
    # Earlier tests may have left other executions on caddy in the shared simulator.
    execution = browser_page.locator("#rail .execution", has_text="restart service:caddy")
    expect(execution).to_be_visible()
    expect(execution.locator(".exec-status")).to_have_text("completed")
    wait_done(turn)
    expect(turn.locator(".text.md")).to_contain_text("completed")
    # Nothing was parked: no approval card anywhere.
    expect(browser_page.locator(".card.approval", has_text="service:caddy")).to_have_count(0)
    page.assert_clean()


def test_deploy_is_approved_in_place_and_the_card_follows_the_execution(
    page: Watched, browser: Browser, stack: Stack
) -> None:
    browser_page = page.page
    browser_page.goto("/ui/")
    browser_page.evaluate("window.__sameDocument = true")
    expect(browser_page.locator("#rail .rail-health")).to_be_visible()

    ask(browser_page, "deploy jellyfin")

    expect(browser_page).to_have_url(SESSION_URL)
    turn = last_turn(browser_page)
    chip = turn.locator("details.chip")
    expect(chip).to_have_class(re.compile(r"\bchip-ok\b"))
    result_seen = time.monotonic()
    inline = turn.locator(".card.approval")
    # The card reaches the conversation and the rail live, without a reload. The delay is printed
    # (well under a second on an idle machine); the bound is loose because CI machines are shared.
    expect(inline).to_be_visible(timeout=5_000)
    # This turn's card in the rail, by its approval id (other tests' approvals may be there too).
    approval_id = inline.locator(".card-ids code").first.inner_text()
    rail = browser_page.locator("#rail .card.approval", has=browser_page.locator("code", has_text=approval_id))
    expect(rail).to_be_visible(timeout=5_000)
    delay = time.monotonic() - result_seen
    print(f"approval card visible inline and in the rail {delay * 1000:.0f} ms after the tool result")
    assert delay < 5
    expect(inline).to_have_attribute("data-stage", "pending")
    expect(inline.locator(".card-what")).to_contain_text("deploy")
    expect(inline.locator(".risk")).to_have_text("config_mutation")
    wait_done(turn)

    # A second tab whose live updates never arrive: its card stays as it was drawn.
    stale = watch(browser.new_context(base_url=stack.url, color_scheme="dark").new_page())
    stale.page.route_web_socket(re.compile(r"/ws/ui/"), lambda socket: _never_answer(socket))
    stale.page.goto(browser_page.url)
    stale_card = stale.page.locator(".transcript .card.approval")
    expect(stale_card).to_have_attribute("data-stage", "pending")

    browser_page.evaluate(STAGE_RECORDER)
    inline.get_by_role("button", name="Approve").click()

    expect(inline).to_have_attribute("data-stage", "completed", timeout=8_000)
    expect(inline.locator(".card-stage")).to_contain_text("approved by operator")
    expect(rail).to_have_attribute("data-stage", "completed")
    stages = _deduplicated(browser_page.evaluate("window.__stages"))
    assert "running" in stages and stages.index("running") < stages.index("completed"), stages
    assert browser_page.evaluate("window.__sameDocument") is True, "the page was reloaded"

    # The stale card's Approve reaches Oikos too late: it says who decided first.
    stale_card.get_by_role("button", name="Approve").click()
    expect(stale_card.locator(".card-notice")).to_have_text("Already decided by operator (approved).")
    expect(stale_card.get_by_role("button", name="Approve")).to_have_count(0)
    stale.page.context.close()

    # Both attempts are on the record, the first decided, the second too late.
    browser_page.goto("/ui/approvals/")
    decisions = browser_page.locator("table.ledger tbody tr", has_text="operator")
    expect(decisions.first).to_contain_text("Already decided")
    expect(decisions.nth(1)).to_contain_text("Decided")
    page.assert_clean()


def _never_answer(socket: WebSocketRoute) -> None:
    """Accept the page's websocket and send nothing: the page never hears of any change."""


def _deduplicated(values: list[str]) -> list[str]:
    seen: list[str] = []
    for value in values:
        if not seen or seen[-1] != value:
            seen.append(value)
    return seen


def test_the_approvals_page_shows_a_new_approval_live_and_follows_it_to_completed(page: Watched, stack: Stack) -> None:
    browser_page = page.page
    browser_page.goto("/ui/approvals/")
    browser_page.evaluate("window.__sameDocument = true")
    # The page's socket is open once its snapshot has redrawn the grid.
    expect(browser_page.locator("#approval-grid")).to_be_attached()
    browser_page.wait_for_function("document.querySelector('#conversation')?.getAttribute('ws-connect')")

    # Something else (another operator's agent, a script) asks Oikos for a deploy.
    created = httpx2.post(
        f"{stack.oikos.api_url}/executions",
        json={"target": "service:gitea", "action": "deploy", "reason": "new release"},
        headers={"Authorization": f"Bearer {DEFAULT_TOKENS['service:hermes-controlroom']}"},
        timeout=10,
    )
    assert created.status_code == 201, created.text
    approval_id = created.json()["approval_id"]

    card = browser_page.locator(
        "#approval-grid .card.approval", has=browser_page.locator(f"code:text-is('{approval_id}')")
    )
    expect(card).to_have_attribute("data-stage", "pending", timeout=8_000)
    card.get_by_role("button", name="Approve").click()

    expect(card).to_have_attribute("data-stage", "completed", timeout=8_000)
    expect(card.locator(".card-stage")).to_contain_text("approved by operator")
    assert browser_page.evaluate("window.__sameDocument") is True, "the page was reloaded"
    page.assert_clean()
