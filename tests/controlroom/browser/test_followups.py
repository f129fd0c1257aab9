"""Must show (follow-ups): the operator restarts the degraded sonarr and, without asking anything
more, Hermes checks in the same session that the restart cleared it.

oikos_sim's `sonarr-degraded` scenario degrades sonarr the way a restart heals; the watcher
(`manage.py watch`, a real subprocess beside the live Daphne, on the same database, settle time
zero by its policy file) hears the execution finish and runs the follow-up turn; the scripted model
checks the service's record and its dependents and gives the verdict the record supports.
"""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

import pytest
from playwright.sync_api import expect

from oikos_sim.scenarios import scenarios_apply
from tests.controlroom.browser.conftest import ARTIFACTS, Stack, Watched
from tests.controlroom.browser.steps import SESSION_URL, ask, poll
from tests.fakes.daphne import LiveDatabase
from tests.fakes.scripted_models import ExecutionRequester, FollowUpChecker
from tests.fakes.watchers import WatchProcess

pytestmark = pytest.mark.e2e


def test_a_restart_of_the_degraded_sonarr_is_checked_and_cleared_without_a_question(
    page: Watched, stack: Stack, tmp_path: Path
) -> None:
    database = LiveDatabase(stack.database_url)
    scenarios_apply(stack.oikos.state.world, ["sonarr-degraded"])
    policy = tmp_path / "policy.json"
    policy.write_text(json.dumps({"kinds": ["signal.fired"], "settle_seconds": 0}))
    watcher = WatchProcess({**stack.env, "HERMES_WATCH_POLICY_FILE": str(policy)}, log_path=tmp_path / "watch.log")
    operator_model = stack.model.responder
    stack.model.responder = FollowUpChecker(ExecutionRequester(target="service:sonarr", action="restart"))
    home = page.page
    try:
        home.goto("/ui/")
        ask(home, "restart service:sonarr")
        expect(home).to_have_url(SESSION_URL)
        session_id = home.url.rstrip("/").rsplit("/", 1)[-1]
        # Oikos runs a restart without an approval: no card to approve, the turn says it completed.
        turns = home.locator(".transcript article.turn")
        expect(turns.first).to_contain_text("completed", timeout=20_000)

        query = (
            "SELECT c.status, c.verdict, c.verdict_detail, c.followup, t.id, t.actor, t.status"
            " FROM agent_changes c JOIN agent_turns t ON t.id = c.followup_turn_id"
            " WHERE c.session_id = %s AND c.target = 'service:sonarr' AND c.verdict != ''"
        )
        session = (database.uuid(session_id),)
        poll(lambda: bool(database.query(query, session)), timeout=30)
        ((status, verdict, detail, followup, turn_hex, actor, turn_status),) = database.query(query, session)
        turn_id = str(uuid.UUID(str(turn_hex)))
        assert (status, verdict, followup) == ("completed", "cleared", "done")
        assert (actor, turn_status) == ("agent:hermes", "done") and "healthy" in detail
        actors = [a for (a,) in database.query("SELECT actor FROM agent_turns WHERE session_id = %s", session)]
        assert sorted(actors) == ["agent:hermes", "operator:operator"]
        checked = database.query(
            "SELECT tool FROM agent_activity WHERE correlation_id = %s ORDER BY started_at", (database.uuid(turn_id),)
        )
        assert [tool for (tool,) in checked] == ["get_entity", "get_blast_radius"]

        if not os.environ.get("REDIS_URL"):
            # The watcher is another process: its turn reaches an open page live only through a
            # shared channel layer (Redis); on the in-memory one the page shows it when opened.
            home.reload()
        # The follow-up in the page: a second turn in the same session, asked by nobody.
        turns = home.locator(".transcript article.turn")
        expect(turns).to_have_count(2, timeout=30_000)
        expect(turns.last).to_contain_text("Verdict: cleared", timeout=30_000)
        expect(turns.last).to_contain_text("get_entity")
        assert stack.oikos.state.world.entities["service:sonarr"].health == "healthy"

        ARTIFACTS.mkdir(exist_ok=True)
        home.screenshot(path=str(ARTIFACTS / "followup-cleared.png"), full_page=True)
        # The asking turn's drawing of the restart (it ran at once: its chip) carries the verdict,
        # linked to the follow-up turn. (The rail shows other tests' executions too.)
        verdict_line = turns.first.locator("p.change-verdict.verdict-cleared")
        expect(verdict_line).to_contain_text("verified: cleared", timeout=15_000)
        link = turns.first.locator("a.change-followup-link")
        expect(link).to_have_attribute("href", f"/ui/s/{session_id}/#turn-{turn_id}")
        page.assert_clean()
    finally:
        stack.model.responder = operator_model
        code = watcher.terminate()
    assert code == 0, watcher.log()
