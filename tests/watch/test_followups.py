"""Follow-ups: after an execution Hermes asked for finishes, the watcher checks it in the same session.

Real parts throughout: oikos_sim runs the executions (its scenarios put the fleet in the state
each test needs), the scripted model reads the follow-up's brief and the tool results like a model
would, the watcher follows the real event stream. Settle times are zero (the policy's
`settle_seconds`), so the follow-up starts as soon as the asking turn has ended.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path

import httpx2
import pytest
from channels.db import database_sync_to_async
from django.utils import timezone
from pytest_django.fixtures import Settings

from agent.models import Activity, AgentSession, Change, Message, Proposal, Turn
from agent.tools import ToolHub
from oikos.client import OikosClient
from oikos_sim.scenarios import BAD_RELEASE, scenarios_apply
from oikos_sim.server import RunningSim
from tests.agent.conftest import ask
from tests.fakes import FakeAnthropic
from tests.fakes.scripted_models import ExecutionRequester, FollowUpChecker
from watch import followups
from watch.followups import followup_brief, followups_recover, verdict_parse
from watch.models import Investigation
from watch.policy import PolicyFileError, TriggerPolicy

pytestmark = pytest.mark.django_db(transaction=True)

# The watcher opens investigations for failed executions and bad health, as it does by default:
# the follow-ups must not add investigations of their own changes on top.
POLICY = TriggerPolicy(
    kinds=frozenset({"signal.fired", "execution.failed"}), settle=(("*", 0.0),), incident_window_seconds=0.0
)
# Nothing here waits on a clock: the database is polled until the follow-up is over, or this passes.
DEADLINE_SECONDS = 60.0


async def _followed_up(execution_id: str | None = None) -> Change:
    """The change (the only one, or `execution_id`'s) once its follow-up is over."""
    deadline = time.monotonic() + DEADLINE_SECONDS
    while True:
        rows = Change.objects.all() if execution_id is None else Change.objects.filter(execution_id=execution_id)
        found = await database_sync_to_async(list)(rows)
        if found and all(row.followup in (Change.FollowUp.DONE, Change.FollowUp.SKIPPED) for row in found):
            assert len(found) == 1, found
            return found[0]
        assert time.monotonic() < deadline, f"no follow-up ended: {found}"
        await asyncio.sleep(0.05)


async def _approve(oikos: RunningSim, approval_id: str) -> None:
    async with OikosClient.from_settings() as client:
        await client.approval_decide(approval_id, approve=True, operator="operator:alice")


def _answer(turn_id: uuid.UUID | None) -> str:
    _status, answer = followups.turn_answer(turn_id)  # type: ignore[arg-type]
    return answer


def _brief(turn_id: uuid.UUID | None) -> str:
    assert turn_id is not None
    first = Message.objects.filter(turn_id=turn_id, role=Message.Role.USER).order_by("id").first()
    assert first is not None
    content = first.content
    return content if isinstance(content, str) else "".join(b.get("text", "") for b in content if isinstance(b, dict))


def _tools(turn_id: uuid.UUID | None) -> list[tuple[str, dict]]:
    assert turn_id is not None
    rows = Activity.objects.filter(correlation_id=turn_id).order_by("started_at", "id")
    return [(row.tool, row.arguments) for row in rows]


async def test_a_restart_that_heals_sonarr_is_checked_in_the_same_session_and_cleared(
    llm: FakeAnthropic, oikos_hub: ToolHub, oikos_settings: RunningSim, watcher_start
) -> None:
    scenarios_apply(oikos_settings.state.world, ["sonarr-degraded"])
    llm.responder = FollowUpChecker(ExecutionRequester(target="service:sonarr", action="restart"))
    await watcher_start(POLICY)

    handle, _ = await ask("restart sonarr", oikos_hub)
    change = await _followed_up()

    assert (change.action, change.target, change.status) == ("restart", "service:sonarr", "completed")
    assert change.decided_by == "policy:auto-act" and change.finished_at is not None
    assert change.verdict == Change.Verdict.CLEARED and "healthy" in change.verdict_detail
    # The follow-up continued the operator's session, as Hermes, without anyone asking.
    turn = await database_sync_to_async(Turn.objects.get)(pk=change.followup_turn_id)
    assert turn.session_id == handle.session_id == change.session_id
    assert (turn.actor, turn.status) == ("agent:hermes", "done")
    turns = await database_sync_to_async(list)(
        Turn.objects.filter(session_id=handle.session_id).order_by("started_at").values_list("actor", flat=True)
    )
    assert turns == ["operator:test", "agent:hermes"]
    # It was told what was asked and how it ended, and checked the service's health and dependents.
    brief = await database_sync_to_async(_brief)(change.followup_turn_id)
    assert "restart of service:sonarr" in brief and "outcome Oikos reported: completed" in brief
    assert "Verdict: cleared|not cleared|failed" in brief
    tools = await database_sync_to_async(_tools)(change.followup_turn_id)
    assert [(tool, args.get("slug")) for tool, args in tools] == [
        ("get_entity", "service:sonarr"),
        ("get_blast_radius", "service:sonarr"),
    ]
    answer = await database_sync_to_async(_answer)(change.followup_turn_id)
    assert "Verdict: cleared" in answer
    assert oikos_settings.state.world.entities["service:sonarr"].health == "healthy"
    # A restart has nothing to roll back.
    assert change.undo_proposal_id is None
    assert await database_sync_to_async(Proposal.objects.count)() == 0


async def test_a_deploy_onto_the_full_disk_fails_and_its_follow_up_says_failed_with_no_undo(
    llm: FakeAnthropic, oikos_hub: ToolHub, oikos_settings: RunningSim, watcher_start
) -> None:
    llm.responder = FollowUpChecker(ExecutionRequester(target="service:postgres", action="deploy"))
    await watcher_start(POLICY)

    await ask("deploy postgres", oikos_hub)
    parked = await database_sync_to_async(Change.objects.get)()
    assert parked.status == "proposed"
    await _approve(oikos_settings, parked.approval_id)
    change = await _followed_up()

    assert change.status == "failed" and "No space left on device" in change.error
    assert change.decided_by == "operator:alice"
    assert change.verdict == Change.Verdict.FAILED
    assert "No space left on device" in change.verdict_detail
    answer = await database_sync_to_async(_answer)(change.followup_turn_id)
    assert "failed" in answer and "No space left on device" in answer
    # Nothing happened, so there is nothing to undo; and the failure is the follow-up's to tell,
    # in the session that asked, not a second investigation's.
    assert change.undo_proposal_id is None
    assert await database_sync_to_async(Proposal.objects.count)() == 0
    assert await database_sync_to_async(Investigation.objects.count)() == 0


async def test_a_deploy_that_cleared_leaves_no_rollback_waiting(
    llm: FakeAnthropic, oikos_hub: ToolHub, oikos_settings: RunningSim, watcher_start
) -> None:
    llm.responder = FollowUpChecker(ExecutionRequester(target="service:gitea", action="deploy"))
    await watcher_start(POLICY)

    await ask("deploy gitea", oikos_hub)
    parked = await database_sync_to_async(Change.objects.get)()
    await _approve(oikos_settings, parked.approval_id)
    change = await _followed_up()

    assert (change.status, change.verdict) == ("completed", Change.Verdict.CLEARED)
    # The card's Undo button still offers the way back; the rail is not asked to reject one.
    assert change.undo_proposal_id is None
    assert not await database_sync_to_async(Proposal.objects.exists)()


async def test_a_deploy_that_leaves_gitea_degraded_is_not_cleared_and_offers_the_rollback(
    llm: FakeAnthropic, oikos_hub: ToolHub, oikos_settings: RunningSim, watcher_start
) -> None:
    scenarios_apply(oikos_settings.state.world, ["bad-release"])
    slug, version = BAD_RELEASE
    llm.responder = FollowUpChecker(ExecutionRequester(target=slug, action="deploy", params={"version": version}))
    await watcher_start(POLICY)

    await ask(f"deploy gitea {version}", oikos_hub)
    parked = await database_sync_to_async(Change.objects.get)()
    await _approve(oikos_settings, parked.approval_id)
    change = await _followed_up()

    assert change.status == "completed"
    assert change.verdict == Change.Verdict.NOT_CLEARED and "degraded" in change.verdict_detail
    assert "rollback" in change.verdict_detail
    brief = await database_sync_to_async(_brief)(change.followup_turn_id)
    assert "say **not cleared** in your first sentence" in brief
    answer = await database_sync_to_async(_answer)(change.followup_turn_id)
    assert answer.lower().startswith("not cleared")
    # The way back: a rollback proposal Hermes offered, waiting for an operator (nothing sent yet).
    proposal = await database_sync_to_async(Proposal.objects.get)()
    assert proposal.pk == change.undo_proposal_id
    assert (proposal.action, proposal.target, proposal.status) == ("rollback", slug, Proposal.Status.PENDING)
    assert proposal.proposed_by == "agent:hermes" and proposal.session_id == change.session_id
    assert [e.action for e in oikos_settings.state.desk.executions.values()] == ["deploy"]


async def test_a_denied_deploy_is_on_the_record_as_denied_with_nothing_to_check(
    llm: FakeAnthropic, oikos_hub: ToolHub, oikos_settings: RunningSim, watcher_start
) -> None:
    llm.responder = FollowUpChecker(ExecutionRequester(target="service:jellyfin", action="deploy"))
    await watcher_start(POLICY)
    await ask("deploy jellyfin", oikos_hub)
    parked = await database_sync_to_async(Change.objects.get)()
    requests = len(llm.requests)

    async with OikosClient.from_settings() as client:
        await client.approval_decide(parked.approval_id, approve=False, operator="operator:bob")
    change = await _followed_up()

    assert (change.status, change.decided_by) == ("denied", "operator:bob")
    assert change.followup == Change.FollowUp.SKIPPED and "nothing ran" in change.followup_note
    assert change.verdict == "" and change.undo_proposal_id is None
    assert len(llm.requests) == requests


async def test_two_watchers_on_one_stream_follow_each_execution_up_once(
    llm: FakeAnthropic, oikos_hub: ToolHub, oikos_settings: RunningSim, watcher_start
) -> None:
    llm.responder = FollowUpChecker(ExecutionRequester(target="service:caddy", action="restart"))
    first = await watcher_start(POLICY, instance=uuid.uuid4())
    second = await watcher_start(POLICY, instance=uuid.uuid4())

    sessions = []
    for _ in range(3):
        handle, _events = await ask("restart caddy", oikos_hub)
        sessions.append(handle.session_id)
    for change in await database_sync_to_async(list)(Change.objects.all()):
        await _followed_up(change.execution_id)

    rows = await database_sync_to_async(list)(Change.objects.order_by("requested_at"))
    assert [row.verdict for row in rows] == ["cleared"] * 3
    assert {row.followup_by for row in rows} <= {first.watcher.instance, second.watcher.instance}
    for session_id in sessions:
        actors = await database_sync_to_async(list)(
            Turn.objects.filter(session_id=session_id).order_by("started_at").values_list("actor", flat=True)
        )
        assert actors == ["operator:test", "agent:hermes"]


async def test_without_a_model_the_follow_up_is_skipped_with_the_reason(
    oikos_settings: RunningSim, watcher_start, settings: Settings
) -> None:
    settings.ANTHROPIC_API_KEY = ""
    settings.ANTHROPIC_BASE_URL = ""
    session = await database_sync_to_async(AgentSession.objects.create)(actor="operator:alice", origin="ui")
    # On the record as the session's request, then sent (the sim numbers its first execution exe-0001).
    await database_sync_to_async(Change.objects.create)(
        execution_id="exe-0001",
        action="restart",
        target="service:caddy",
        session=session,
        requested_at=timezone.now(),
        asked_by="operator:alice",
    )
    await watcher_start(POLICY)
    async with OikosClient.from_settings() as client:
        await client.execution_request(target="service:caddy", action="restart", operator="operator:alice")

    change = await _followed_up()

    assert change.status == "completed"
    assert change.followup == Change.FollowUp.SKIPPED and change.followup_note == "no model is configured"
    assert change.verdict == "" and change.followup_turn_id is None
    assert await database_sync_to_async(Turn.objects.filter(session_id=session.id).count)() == 0


async def test_with_the_budget_spent_down_to_its_reserve_the_follow_up_is_skipped(
    llm: FakeAnthropic, oikos_settings: RunningSim, watcher_start, settings: Settings
) -> None:
    settings.HERMES_DAILY_TOKEN_BUDGET = 1_000_000
    settings.HERMES_BUDGET_RESERVE_SHARE = 0.2
    settings.HERMES_TURN_TOKEN_BUDGET = 100_000
    session = await database_sync_to_async(AgentSession.objects.create)(actor="operator:alice", origin="ui")
    # Spent today down to the reserve, which is kept for operators' questions.
    await database_sync_to_async(Turn.objects.create)(
        session=session, actor="operator:alice", status="done", tokens_total=800_000
    )
    await database_sync_to_async(Change.objects.create)(
        execution_id="exe-0001",
        action="restart",
        target="service:caddy",
        session=session,
        requested_at=timezone.now(),
        asked_by="operator:alice",
    )
    await watcher_start(POLICY)
    async with OikosClient.from_settings() as client:
        await client.execution_request(target="service:caddy", action="restart", operator="operator:alice")

    change = await _followed_up()

    assert change.followup == Change.FollowUp.SKIPPED and change.followup_note == "the daily budget is spent"
    assert llm.requests == []


async def test_a_follow_up_whose_watcher_died_is_run_again_once_then_skipped(
    llm: FakeAnthropic, oikos_hub: ToolHub, oikos_settings: RunningSim, watcher_start
) -> None:
    from tests.watch.test_recovery import _dead_watcher

    llm.responder = FollowUpChecker(ExecutionRequester(target="service:caddy", action="restart"))
    handle, _ = await ask("restart caddy", oikos_hub)
    dead = await database_sync_to_async(_dead_watcher)()
    (change,) = await database_sync_to_async(list)(Change.objects.all())
    # What a killed watcher leaves: the follow-up claimed by it, never finished.
    await database_sync_to_async(Change.objects.filter(pk=change.pk).update)(
        followup=Change.FollowUp.CLAIMED, followup_by=dead
    )
    twice = await database_sync_to_async(
        lambda: Change.objects.create(
            execution_id="exe-gone",
            action="restart",
            target="service:gitea",
            status="completed",
            session_id=handle.session_id,
            requested_at=change.requested_at,
            followup=Change.FollowUp.CLAIMED,
            followup_by=dead,
            followup_note=followups.RETRIED_NOTE,
        )
    )()

    await watcher_start(POLICY)
    recovered = await _followed_up(change.execution_id)
    gave_up = await _followed_up(twice.execution_id)

    assert recovered.verdict == Change.Verdict.CLEARED and recovered.followup_by != dead
    assert gave_up.followup == Change.FollowUp.SKIPPED and "stopped twice" in gave_up.followup_note
    # Nothing is left to take over when the next watcher starts.
    again = await database_sync_to_async(followups_recover)(watcher=uuid.uuid4())
    assert (again.retry, again.given_up, again.conclude, again.unclaimed) == ([], [], [], [])


async def test_an_execution_that_finished_while_no_watcher_ran_is_followed_up_when_one_starts(
    llm: FakeAnthropic, oikos_hub: ToolHub, oikos_settings: RunningSim, watcher_start
) -> None:
    llm.responder = FollowUpChecker(ExecutionRequester(target="service:caddy", action="restart"))
    await ask("restart caddy", oikos_hub)
    (change,) = await database_sync_to_async(list)(Change.objects.all())
    assert change.status == "completed" and change.followup == Change.FollowUp.PENDING

    await watcher_start(POLICY)
    change = await _followed_up()

    assert change.verdict == Change.Verdict.CLEARED


def test_the_verdict_line_is_read_however_it_is_marked_up() -> None:
    assert verdict_parse("Checked.\n\n**Verdict:** Cleared — sonarr is healthy") == followups.Verdict(
        "cleared", "sonarr is healthy"
    )
    found = verdict_parse("Not cleared.\nVerdict - not cleared: still 502\nNext step: roll back")
    assert found is not None and found.verdict == "not_cleared" and "roll back" in found.detail
    assert verdict_parse("verdict: FAILED: no space") == followups.Verdict("failed", "no space")
    assert verdict_parse("It looks fine to me.") is None


def test_a_follow_up_without_a_verdict_is_judged_conservatively() -> None:
    failed = Change(status="failed", error="No space left on device")
    completed = Change(status="completed")
    assert followups.verdict_derive(failed, "hmm", Turn.Status.DONE) == followups.Verdict(
        "failed", "No space left on device"
    )
    assert followups.verdict_derive(completed, "looks fine", Turn.Status.DONE) == followups.Verdict(
        "not_cleared", "the follow-up gave no verdict"
    )
    assert followups.verdict_derive(completed, "Verdict: cleared — ok", Turn.Status.ERROR).verdict == "not_cleared"


def test_the_brief_of_an_investigations_action_asks_about_its_signal() -> None:
    session = AgentSession.objects.create(actor="agent:hermes", origin="signal", title="postgres")
    Investigation.objects.create(
        session=session,
        entity="service:sonarr",
        kind="http_timeout",
        title="sonarr times out",
        first_event_id="3",
        event={"data": {"summary": "indexer search timed out 5 times"}},
    )
    change = Change(
        execution_id="exe-1",
        action="restart",
        target="service:sonarr",
        status="completed",
        session=session,
        asked_by="operator:alice",
    )
    brief = followup_brief(change, settled=15)
    assert "investigation of http_timeout on service:sonarr" in brief
    assert "indexer search timed out 5 times" in brief and "15 s after" in brief


def test_settle_times_by_action_and_from_the_policy_file(settings: Settings, tmp_path: Path) -> None:
    default = TriggerPolicy()
    assert default.settle_seconds("restart", "completed") < default.settle_seconds("deploy", "completed")
    assert default.settle_seconds("deploy", "failed") == 0.0
    path = tmp_path / "policy.json"
    path.write_text('{"settle_seconds": {"deploy": 2}}')
    settings.HERMES_WATCH_POLICY_FILE = str(path)
    policy = TriggerPolicy.from_settings()
    assert policy.settle_seconds("deploy", "completed") == 2.0
    assert policy.settle_seconds("restart", "completed") == default.settle_seconds("restart", "completed")
    path.write_text('{"settle_seconds": 0}')
    assert TriggerPolicy.from_settings().settle_seconds("config", "completed") == 0.0
    path.write_text('{"settle_seconds": "soon"}')
    with pytest.raises(PolicyFileError, match="settle_seconds"):
        TriggerPolicy.from_settings()


def test_two_daphne_processes_and_two_watchers_follow_each_finished_execution_up_exactly_once(
    oikos: RunningSim, fake_llm: FakeAnthropic, tmp_path: Path
) -> None:
    from tests.fakes.daphne import DaphneServer, LiveDatabase
    from tests.fakes.oikos_fixtures import AGENT_TOKEN, OPERATOR_TOKEN
    from tests.fakes.subprocesses import clean_environ
    from tests.fakes.watchers import WatchProcess

    count = 4
    database = LiveDatabase.create(tmp_path, name="followups")
    fake_llm.responder = FollowUpChecker(ExecutionRequester(target="service:caddy", action="restart"))
    policy = tmp_path / "policy.json"
    policy.write_text('{"kinds": ["signal.fired"], "settle_seconds": 0}')
    env = {
        **clean_environ(),
        **fake_llm.env(),
        "DATABASE_URL": database.url,
        "OIKOS_MCP_URL": oikos.mcp_url,
        "OIKOS_MCP_TOKEN": AGENT_TOKEN,
        "OIKOS_API_URL": oikos.api_url,
        "OIKOS_API_TOKEN": OPERATOR_TOKEN,
        "HERMES_WATCH_POLICY_FILE": str(policy),
    }
    watchers = [WatchProcess(env, log_path=tmp_path / f"watch-{n}.log") for n in (1, 2)]
    try:
        with (
            DaphneServer(database=database, env=env, log_path=tmp_path / "daphne-1.log") as one,
            DaphneServer(database=database, env=env, log_path=tmp_path / "daphne-2.log") as two,
        ):
            # Each process asks for restarts in sessions of its own; the turn reads to its end.
            for number in range(count):
                hermes = (one, two)[number % 2]
                asked = httpx2.post(f"{hermes.url}/chat", json={"message": "restart caddy"}, timeout=60)
                assert asked.status_code == 200, asked.text
            done = "SELECT COUNT(*) FROM agent_changes WHERE followup IN ('done', 'skipped')"
            deadline = time.monotonic() + DEADLINE_SECONDS
            while database.query(done)[0][0] < count and time.monotonic() < deadline:
                time.sleep(0.1)
        rows = database.query("SELECT execution_id, verdict, followup_by, followup_turn_id FROM agent_changes")
        assert sorted((execution, verdict) for execution, verdict, _by, _turn in rows) == [
            (f"exe-{n:04d}", "cleared") for n in range(1, count + 1)
        ]
        # One follow-up turn per session, each the turn its change names, by one of the watchers.
        turns = database.query("SELECT id, session_id FROM agent_turns WHERE actor = 'agent:hermes'")
        assert len(turns) == count and len({session for _id, session in turns}) == count
        assert {str(turn) for _e, _v, _b, turn in rows} == {str(turn) for turn, _s in turns}
        instances = {str(row[0]) for row in database.query("SELECT id FROM agent_instances WHERE role = 'watch'")}
        assert {str(by) for _e, _v, by, _t in rows} <= instances
    finally:
        codes = [watcher.terminate() for watcher in watchers]
        database.drop()
    assert codes == [0, 0], [watcher.log() for watcher in watchers]
