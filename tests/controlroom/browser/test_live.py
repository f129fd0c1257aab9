"""What changes elsewhere shows without a reload: the decisions table, the context meter, the rail's
finished approvals."""

from __future__ import annotations

import re

import httpx2
import pytest
from playwright.sync_api import Browser, Locator, Page, expect

from oikos_sim.auth import DEFAULT_TOKENS
from tests.controlroom.browser.conftest import Stack, Watched, watch
from tests.controlroom.browser.steps import SESSION_URL, ask, last_turn, wait_done

pytestmark = pytest.mark.e2e

# Set once the page's socket has opened (htmx's ws extension says so on the document).
SOCKET_OPEN = "document.addEventListener('htmx:wsOpen', () => { window.__socketOpen = true; })"


def _deploy_requested(stack: Stack, target: str) -> str:
    """Something outside Hermes (another operator's agent, a script) asks Oikos for a deploy."""
    created = httpx2.post(
        f"{stack.oikos.api_url}/executions",
        json={"target": target, "action": "deploy", "reason": "new release"},
        headers={"Authorization": f"Bearer {DEFAULT_TOKENS['service:hermes-controlroom']}"},
        timeout=10,
    )
    assert created.status_code == 201, created.text
    return str(created.json()["approval_id"])


def _grid_card(page: Page, approval_id: str) -> Locator:
    return page.locator("#approval-grid .card.approval", has=page.locator(f"code:text-is('{approval_id}')"))


def test_the_decisions_table_shows_a_decision_taken_in_another_browser_live(
    page: Watched, browser: Browser, stack: Stack
) -> None:
    approval_id = _deploy_requested(stack, "service:gitea")
    watching = page.page
    watching.add_init_script(SOCKET_OPEN)
    watching.goto("/ui/approvals/")
    watching.evaluate("window.__sameDocument = true")
    watching.wait_for_function("window.__socketOpen === true")
    decisions = watching.locator("#decisions tbody tr", has=watching.locator(f"code:text-is('{approval_id}')"))
    expect(decisions).to_have_count(0)

    # Another operator, in another browser, denies it.
    other = watch(browser.new_context(base_url=stack.url, color_scheme="dark").new_page())
    other.page.goto("/ui/approvals/")
    _grid_card(other.page, approval_id).get_by_role("button", name="Deny").click()
    expect(_grid_card(other.page, approval_id)).to_have_attribute("data-stage", "denied")

    expect(decisions).to_have_count(1)
    expect(decisions).to_contain_text("deny")
    expect(decisions).to_contain_text("Decided")
    # The grid followed too, and the page was never reloaded.
    expect(_grid_card(watching, approval_id)).to_have_attribute("data-stage", "denied")

    # A late attempt by a plain HTTP client (a stale card, a script): Oikos sends no event for it,
    # only Hermes's record says it happened; that shows too.
    token = other.page.locator("input[name=csrfmiddlewaretoken]").first.get_attribute("value")
    late = other.page.request.post(
        "/ui/approvals/decide/",
        form={
            "csrfmiddlewaretoken": token or "",
            "approval_id": approval_id,
            "execution_id": "",
            "decision": "approve",
        },
    )
    assert late.ok, late.text()
    expect(decisions).to_have_count(2)
    expect(decisions.first).to_contain_text("Already decided")
    assert watching.evaluate("window.__sameDocument") is True, "the page was reloaded"
    other.page.context.close()
    page.assert_clean()


def test_the_context_meter_follows_each_turn_without_a_reload(page: Watched) -> None:
    browser_page = page.page
    browser_page.goto("/ui/")
    ask(browser_page, "what's degraded and what depends on it?")
    expect(browser_page).to_have_url(SESSION_URL)
    browser_page.evaluate("window.__sameDocument = true")
    wait_done(last_turn(browser_page))
    meter = browser_page.locator("#conversation #context-meter")
    expect(meter).to_be_visible()
    expect(meter).to_contain_text(re.compile(r"Context [\d.,]+k? of [\d.,]+k? tokens"))
    first = meter.inner_text()

    # A second turn makes the context larger: the meter says so as the turn ends.
    ask(browser_page, "and what should I do about it?")
    expect(browser_page.locator(".transcript article.turn")).to_have_count(2)
    wait_done(last_turn(browser_page))
    expect(meter).not_to_have_text(first)
    assert browser_page.evaluate("window.__sameDocument") is True, "the page was reloaded"
    page.assert_clean()


def _decided_in_oikos(stack: Stack, approval_id: str, *, approve: bool) -> None:
    """Another operator decides in Oikos itself (its UI, a script): Hermes only hears the events."""
    verb = "approve" if approve else "deny"
    decided = httpx2.post(
        f"{stack.oikos.api_url}/approvals/{approval_id}/{verb}",
        json={"operator": "alice"},
        headers={"Authorization": f"Bearer {DEFAULT_TOKENS['service:hermes-controlroom']}"},
        timeout=10,
    )
    assert decided.status_code == 200, decided.text


def test_the_rail_shows_approvals_decided_elsewhere_until_they_finish(page: Watched, stack: Stack) -> None:
    browser_page = page.page
    browser_page.add_init_script(SOCKET_OPEN)
    browser_page.goto("/ui/")
    browser_page.evaluate("window.__sameDocument = true")
    browser_page.wait_for_function("window.__socketOpen === true")
    approved = _deploy_requested(stack, "service:grafana")
    denied = _deploy_requested(stack, "service:authentik")

    def rail_card(approval_id: str) -> Locator:
        return browser_page.locator("#rail .card.approval", has=browser_page.locator(f"code:text-is('{approval_id}')"))

    expect(rail_card(approved)).to_have_attribute("data-stage", "pending")
    expect(rail_card(denied)).to_have_attribute("data-stage", "pending")
    _decided_in_oikos(stack, approved, approve=True)
    _decided_in_oikos(stack, denied, approve=False)

    expect(rail_card(denied)).to_have_attribute("data-stage", "denied")
    expect(rail_card(denied).locator(".card-stage")).to_contain_text("Denied by alice")
    expect(rail_card(approved)).to_have_attribute("data-stage", "completed", timeout=8_000)
    expect(rail_card(approved).locator(".card-stage")).to_contain_text("approved by alice")
    assert browser_page.evaluate("window.__sameDocument") is True, "the page was reloaded"
    page.assert_clean()


def _spent(page: Page) -> int:
    return int(page.locator("#budget-meter strong").inner_text().replace(",", ""))


def test_a_stopped_turn_shows_what_it_cost_and_the_rail_s_spend_counts_it(page: Watched) -> None:
    browser_page = page.page
    browser_page.goto("/ui/")
    browser_page.evaluate("window.__sameDocument = true")
    before = _spent(browser_page)
    ask(browser_page, "a long report I will stop")
    turn = last_turn(browser_page)
    expect(turn.locator(".text.streaming")).to_contain_text("Line 2:")
    browser_page.locator("#turn-controls").get_by_role("button", name="Stop").click()
    expect(turn.locator(".turn-foot .status")).to_have_text("cancelled")

    # What streamed before the Stop was paid for: the footer prices it, the rail's spend counts it.
    cost = turn.locator(".turn-foot .cost")
    expect(cost).to_have_text(re.compile(r"^\$\d+\.\d+$"))
    assert float(cost.inner_text().lstrip("$")) > 0
    out = turn.locator(".turn-foot .usage").inner_text()
    assert not re.search(r"\b0 out\b", out), out
    foot_tokens = sum(int(n.replace(",", "")) for n in re.findall(r"([\d,]+) (?:in|out|cached|cache write)", out))
    browser_page.wait_for_function(
        "(least) => Number(document.querySelector('#budget-meter strong').textContent.replace(/,/g, '')) >= least",
        arg=before + foot_tokens,
    )
    assert browser_page.evaluate("window.__sameDocument") is True, "the page was reloaded"
    page.assert_clean()
