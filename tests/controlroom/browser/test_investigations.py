"""Must show (issue 16): a signal fires, Hermes investigates on its own, and the operator sees it.

oikos_sim fires a signal while the control room is open; the watcher (`manage.py watch`, a real
subprocess beside the live Daphne, on the same database) opens exactly one investigation, which
runs the health → blast-radius chain with the scripted model; the new investigation announces
itself on the open pages and its escalation shows — all without a reload and without a question.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from oikos_sim.pulse import signal_fire
from tests.controlroom.browser.conftest import ARTIFACTS, Stack, Watched, watch
from tests.controlroom.browser.steps import SESSION_URL, poll
from tests.fakes.daphne import LiveDatabase
from tests.fakes.watchers import WatchProcess

pytestmark = pytest.mark.e2e


def _open_and_following(page: Page, path: str) -> None:
    """Open `path` and wait for its socket's first frame: from then on, new investigations are news to it."""
    with page.expect_websocket() as socket:
        page.goto(path)
    socket.value.wait_for_event("framereceived")


def test_a_fired_signal_is_investigated_and_escalated_live_without_the_operator_asking(
    page: Watched, stack: Stack, tmp_path: Path
) -> None:
    database = LiveDatabase(stack.database_url)
    requests_before = len(stack.model.requests)
    home = page.page
    listing = watch(home.context.new_page())
    watcher = WatchProcess(stack.env, log_path=tmp_path / "watch.log")
    try:
        _open_and_following(listing.page, "/ui/investigations/")
        _open_and_following(home, "/ui/")

        signal_fire(
            stack.oikos.state.world,
            stack.oikos.state.events,
            "service:postgres",
            "wal_archive_failing",
            "critical",
            "archive_command failing",
        )

        # Announced on every open page, and listed, without a reload.
        notice = home.locator("#notices .notice-investigation")
        expect(notice).to_contain_text("Hermes opened an investigation", timeout=15_000)
        expect(notice.locator("a")).to_contain_text("wal_archive_failing on service:postgres")
        expect(home.locator("#session-list .badge-investigation").first).to_contain_text("investigation")
        expect(listing.page.locator("#notices .notice-investigation")).to_contain_text("service:postgres")
        row = listing.page.locator("#investigation-list .investigation-row", has_text="service:postgres")
        expect(row).to_have_count(1)

        notice.locator("a").click()
        expect(home).to_have_url(SESSION_URL)
        home.evaluate("window.__sameDocument = true")
        card = home.locator("#escalation-card")
        # The escalation, when the investigation's turn ends: health, then blast radius.
        expect(card.locator("dd").nth(1)).to_contain_text("service:authentik", timeout=20_000)
        expect(card).to_contain_text("service:postgres")
        expect(card).to_contain_text("get_health_summary")
        expect(card).to_contain_text("get_blast_radius")
        chips = home.locator(".transcript details.chip .chip-tool")
        expect(chips).to_have_text(["get_health_summary", "get_blast_radius"])
        assert home.evaluate("window.__sameDocument") is True
        # The investigations page follows it too: its row now has the summary.
        expect(row).to_contain_text("service:postgres is degraded", timeout=10_000)

        ARTIFACTS.mkdir(exist_ok=True)
        home.screenshot(path=str(ARTIFACTS / "investigation-escalation.png"), full_page=True)
        listing.page.screenshot(path=str(ARTIFACTS / "investigations-page.png"), full_page=True)

        # Exactly one investigation of postgres (other tests may leave theirs of other entities), as
        # a session Hermes opened itself; the model was asked only by it.
        of_postgres = "FROM watch_investigations i WHERE i.entity = 'service:postgres'"
        poll(lambda: database.query(f"SELECT escalation {of_postgres}") != [])
        ((title, actor, origin),) = database.query(
            "SELECT s.title, s.actor, s.origin FROM watch_investigations i"
            " JOIN agent_sessions s ON s.id = i.session_id WHERE i.entity = 'service:postgres'"
        )
        assert (actor, origin) == ("agent:hermes", "signal") and "wal_archive_failing" in title
        investigation_requests = stack.model.requests[requests_before:]
        assert len(investigation_requests) == 3  # health, blast radius, the answer
        page.assert_clean()
        listing.assert_clean()
    finally:
        code = watcher.terminate()
        listing.page.close()
    assert code == 0, watcher.log()
