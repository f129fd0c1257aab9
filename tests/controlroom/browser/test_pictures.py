"""Pictures where people would rather look than read: a metric answer drawn as a chart in its chip,
a blast radius drawn as a dependency graph on the approval card and in the chip of the call."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from oikos_sim.graph import blast_radius
from tests.controlroom.browser.conftest import ARTIFACTS, Stack, Watched
from tests.controlroom.browser.steps import SESSION_URL, ask, last_turn, wait_done
from tests.fakes.operator_models import CHART_QUERY

pytestmark = pytest.mark.e2e


def test_a_metric_answer_shows_as_a_chart_in_its_chip_with_the_json_one_click_away(page: Watched) -> None:
    browser_page = page.page
    browser_page.goto("/ui/")
    ask(browser_page, "show me a chart of postgres disk")
    expect(browser_page).to_have_url(SESSION_URL)
    turn = last_turn(browser_page)
    wait_done(turn)

    chip = turn.locator("details.chip", has=browser_page.locator(".chip-tool", has_text="query_metrics"))
    chart = chip.locator(".chip-chart svg[role=img]")
    # Seen without opening the chip: the picture is in its summary line.
    expect(chart).to_be_visible()
    label = f"{CHART_QUERY['metric']} on {CHART_QUERY['slug']}, 24 points, last "
    expect(chart).to_have_attribute("aria-label", re.compile("^" + label + r"[\d.]+%$"))
    expect(chart.locator("text").first).to_be_visible()
    expect(chart).to_contain_text(f"{CHART_QUERY['metric']} on {CHART_QUERY['slug']}")
    expect(chart.locator("polyline")).to_have_count(1)

    # The numbers stay one click away: opened, the chip folds its raw JSON under the chart.
    chip.locator("summary").first.click()
    raw = chip.locator("details.chip-raw")
    expect(raw.locator(".chip-result")).to_be_hidden()
    raw.locator("summary").click()
    expect(raw.locator(".chip-result")).to_contain_text('"points"')
    ARTIFACTS.mkdir(exist_ok=True)
    browser_page.screenshot(path=str(ARTIFACTS / "metric-chip-chart.png"), full_page=True)

    # Read back from the database, the same picture.
    browser_page.reload()
    expect(last_turn(browser_page).locator(".chip-chart svg[role=img]")).to_have_attribute(
        "aria-label", re.compile("^" + label)
    )
    page.assert_clean()


def test_an_approval_card_draws_what_depends_on_its_target(page: Watched, stack: Stack) -> None:
    browser_page = page.page
    browser_page.goto("/ui/")
    ask(browser_page, "deploy jellyfin please")
    expect(browser_page).to_have_url(SESSION_URL)
    turn = last_turn(browser_page)
    inline = turn.locator(".card.approval")
    expect(inline).to_have_attribute("data-stage", "pending", timeout=5_000)
    wait_done(turn)

    dependants = blast_radius(stack.oikos.state.world, "service:jellyfin")
    assert dependants, "the seeded fleet has dependants of service:jellyfin"
    # The rail also keeps the last approvals decided (earlier tests'): this one is the pending jellyfin card.
    rail_card = browser_page.locator("#rail .card.approval[data-stage=pending]", has_text="service:jellyfin").first
    for card in (inline, rail_card):
        graph = card.locator(".blast-graph svg[role=img]")
        expect(graph).to_be_visible()
        expect(graph).to_have_attribute(
            "aria-label", re.compile(rf"^Blast radius of service:jellyfin: {len(dependants)} dependant")
        )
        # The target, then each dependant by name, with its health in the legend.
        expect(graph.locator("text").first).to_have_text("service:jellyfin")
        for entry in dependants:
            expect(graph.locator("text", has_text=entry["slug"])).to_have_count(1)
        expect(graph.locator(".graph-legend")).to_contain_text(dependants[0]["health"])
    ARTIFACTS.mkdir(exist_ok=True)
    browser_page.screenshot(path=str(ARTIFACTS / "approval-card-graph.png"), full_page=True)

    # Leave Oikos as found (the stack is shared by the run's browser tests): deny the deploy.
    inline.get_by_role("button", name="Deny").click()
    expect(turn.locator(".card.approval")).to_have_attribute("data-stage", "denied", timeout=8_000)
    page.assert_clean()


def test_a_blast_radius_call_is_drawn_in_its_chip(page: Watched) -> None:
    browser_page = page.page
    browser_page.goto("/ui/")
    ask(browser_page, "what is degraded right now?")
    expect(browser_page).to_have_url(SESSION_URL)
    turn = last_turn(browser_page)
    wait_done(turn)

    chip = turn.locator("details.chip", has=browser_page.locator(".chip-tool", has_text="get_blast_radius"))
    graph = chip.locator(".chip-chart svg[role=img]")
    expect(graph).to_be_visible()
    expect(graph).to_have_attribute("aria-label", re.compile(r"^Blast radius of \S+: \d+ dependant"))
    page.assert_clean()
