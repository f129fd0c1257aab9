"""An approval card carries what an operator needs to decide: why, where it was asked, what breaks."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from oikos_sim.graph import blast_radius
from tests.controlroom.browser.conftest import ARTIFACTS, Stack, Watched
from tests.controlroom.browser.steps import SESSION_URL, ask, last_turn, wait_done

pytestmark = pytest.mark.e2e

# What the scripted model passes as `reason` to request_execution (tests/fakes/scripted_models.py).
SCRIPTED_REASON = "asked by the operator"


def test_a_parked_deploy_card_shows_the_reason_the_blast_radius_and_a_link_to_its_turn(
    page: Watched, stack: Stack
) -> None:
    browser_page = page.page
    browser_page.goto("/ui/")
    expect(browser_page.locator("#rail .rail-health")).to_be_visible()

    ask(browser_page, "deploy jellyfin please")

    expect(browser_page).to_have_url(SESSION_URL)
    turn = last_turn(browser_page)
    turn_id = (turn.get_attribute("id") or "").removeprefix("turn-")
    inline = turn.locator(".card.approval")
    expect(inline).to_have_attribute("data-stage", "pending", timeout=5_000)
    wait_done(turn)
    approval_id = inline.locator(".card-ids code").first.inner_text()

    # What oikos_sim's seeded relationships say depends on jellyfin (service:jellyseerr, ...).
    dependants = [entry["slug"] for entry in blast_radius(stack.oikos.state.world, "service:jellyfin")]
    assert dependants, "the seeded fleet has dependants of service:jellyfin"
    affects = f"affects {len(dependants)}: {dependants[0]}"

    # In the conversation: the reason, and the blast radius once Hermes has fetched it.
    expect(inline.locator(".card-reason")).to_contain_text(SCRIPTED_REASON)
    expect(inline.locator(".card-blast summary")).to_contain_text(affects)
    # In the rail, the same card.
    rail = browser_page.locator("#rail .card.approval", has=browser_page.locator("code", has_text=approval_id))
    expect(rail.locator(".card-reason")).to_contain_text(SCRIPTED_REASON)
    expect(rail.locator(".card-blast summary")).to_contain_text(affects)
    expect(rail.locator(".card-waited")).to_contain_text("waiting for")

    # On the Approvals page: the card links back to the turn that asked.
    browser_page.goto("/ui/approvals/")
    card = browser_page.locator("#approval-grid .card.approval", has=browser_page.locator("code", has_text=approval_id))
    expect(card.locator(".card-reason")).to_contain_text(SCRIPTED_REASON)
    blast = card.locator(".card-blast")
    expect(blast.locator("summary")).to_contain_text(affects)
    # The full list is one click away.
    blast.locator("summary").click()
    for slug in dependants:
        expect(blast.locator(".card-blast-list")).to_contain_text(slug)
    link = card.locator(".card-origin a")
    expect(link).to_have_text("deploy jellyfin please")
    ARTIFACTS.mkdir(exist_ok=True)
    # The page redraws its cards on live updates: a card's element, or its box, can be gone by the
    # time it is captured (CI: "Element is not attached to the DOM", then no box), so the whole page is.
    browser_page.screenshot(path=str(ARTIFACTS / "approval-card-context.png"), full_page=True)

    link.click()
    expect(browser_page).to_have_url(re.compile(rf"/ui/s/[0-9a-f-]{{36}}/#turn-{turn_id}$"))
    target = browser_page.locator(f"article#turn-{turn_id}")
    expect(target).to_be_in_viewport()
    expect(target.locator(".question")).to_contain_text("deploy jellyfin please")

    # Leave Oikos as found (the stack is shared by the run's browser tests): deny the deploy.
    target.locator(".card.approval").get_by_role("button", name="Deny").click()
    expect(target.locator(".card.approval")).to_have_attribute("data-stage", "denied", timeout=8_000)
    page.assert_clean()
