"""The watcher against `oikos_sim` and the scripted model: a signal fires, Hermes investigates."""

from __future__ import annotations

import pytest
from channels.db import database_sync_to_async
from django.test import AsyncClient
from pytest_django.fixtures import Settings

from agent.models import Activity, AgentSession, Proposal, Turn
from oikos_sim.pulse import SCRIPT, signal_fire, signal_resolve
from oikos_sim.server import RunningSim
from tests.fakes import FakeAnthropic
from tests.fakes.anthropic_script import Reply, text, tool_use
from tests.fakes.scripted_models import DegradedInvestigator, ExecutionRequester, offered_tool
from watch import services
from watch.models import Investigation
from watch.policy import TriggerPolicy

pytestmark = pytest.mark.django_db(transaction=True)


def _policy(**overrides: object) -> TriggerPolicy:
    values: dict[str, object] = {
        "kinds": frozenset({"signal.fired", "entity.health_changed", "execution.failed"}),
        "min_severity": "warning",
        "cooldown_seconds": 1800.0,
        "hourly_cap": 6,
    }
    values.update(overrides)
    return TriggerPolicy(**values)  # type: ignore[arg-type]


def _investigations() -> list[Investigation]:
    return list(Investigation.objects.order_by("id"))


async def test_a_fired_signal_opens_one_investigation_that_escalates(
    llm: FakeAnthropic, oikos_settings: RunningSim, watcher_start
) -> None:
    model = DegradedInvestigator()
    llm.responder = model
    running = await watcher_start(_policy())
    world, events = oikos_settings.state.world, oikos_settings.state.events

    signal_fire(world, events, "service:postgres", "wal_archive_failing", "critical", "archive_command failing")
    ((event, claim),) = await running.handled_next()
    await running.investigations_done()

    assert event.type == "signal.fired"
    assert claim is not None and claim.outcome == "opened"
    (investigation,) = await database_sync_to_async(_investigations)()
    session = await database_sync_to_async(AgentSession.objects.get)(pk=investigation.session_id)
    assert (session.actor, session.origin) == ("agent:hermes", "signal")
    assert "wal_archive_failing" in session.title and "service:postgres" in session.title
    # The first turn was given the brief, and ran the health → blast-radius chain.
    first = llm.requests[0].body["messages"][0]["content"]
    brief = first if isinstance(first, str) else first[0]["text"]
    assert "archive_command failing" in brief and "## Escalation" in brief
    turn = await database_sync_to_async(Turn.objects.get)(session_id=session.id)
    assert turn.status == "done" and turn.actor == "agent:hermes"
    tools = await database_sync_to_async(list)(
        Activity.objects.filter(correlation_id=turn.id).order_by("started_at", "id").values_list("tool", flat=True)
    )
    assert tools == ["get_health_summary", "get_blast_radius"]
    escalation = investigation.escalation
    assert escalation["correlation_id"] == str(turn.id)
    assert [e["tool"] for e in escalation["evidence"]] == ["get_health_summary", "get_blast_radius"]
    assert "service:postgres" in escalation["summary"]
    assert "service:authentik" in escalation["impact"]
    assert escalation["approvals"] == []

    # The control room: a badge in the session list, the escalation as a card atop its session.
    html = (await AsyncClient().get(f"/ui/s/{session.id}/")).content.decode()
    assert "investigation · open" in html
    card = html[html.index('class="escalation-card') : html.index("</article>")]
    assert "service:authentik" in card and "get_blast_radius" in card and str(turn.id) in card


async def test_the_escalation_section_is_parsed(llm: FakeAnthropic, oikos_settings: RunningSim, watcher_start) -> None:
    def responder(request: dict) -> Reply:
        if len(request["messages"]) == 1:
            return Reply.tool_use(offered_tool(request, "get_health_summary"), {})
        return Reply.text(
            "Checked.\n\n## Escalation\nSummary: sonarr times out\nImpact: nothing depends on it\n"
            "Likely cause: the indexer\nNext step: restart sonarr"
        )

    llm.responder = responder
    running = await watcher_start(_policy())
    signal_fire(
        oikos_settings.state.world, oikos_settings.state.events, "service:sonarr", "http_timeout", "warning", "x"
    )
    await running.handled_next()
    await running.investigations_done()

    (investigation,) = await database_sync_to_async(_investigations)()
    assert {k: investigation.escalation[k] for k in ("summary", "impact", "likely_cause", "next_step")} == {
        "summary": "sonarr times out",
        "impact": "nothing depends on it",
        "likely_cause": "the indexer",
        "next_step": "restart sonarr",
    }


async def test_without_an_escalation_section_the_summary_is_the_final_answer_and_impact_the_blast_radius(
    llm: FakeAnthropic, oikos_settings: RunningSim, watcher_start
) -> None:
    def responder(request: dict) -> Reply:
        turns = len(request["messages"])
        if turns == 1:
            return Reply.blocks(
                [text("Let me look at fleet health first."), tool_use(offered_tool(request, "get_health_summary"))]
            )
        if turns == 3:
            return Reply.blocks(
                [
                    text("Postgres looks bad; checking what depends on it."),
                    tool_use(offered_tool(request, "get_blast_radius"), {"slug": "service:postgres"}),
                ]
            )
        return Reply.text(
            "Postgres's WAL archive is **failing**: the PBS datastore is full.\n\n"
            "Free space on the datastore, then rerun the archive."
        )

    llm.responder = responder
    running = await watcher_start(_policy())
    signal_fire(
        oikos_settings.state.world,
        oikos_settings.state.events,
        "service:postgres",
        "wal_archive_failing",
        "critical",
        "x",
    )
    await running.handled_next()
    await running.investigations_done()

    (investigation,) = await database_sync_to_async(_investigations)()
    escalation = investigation.escalation
    # What the model concluded, not what it said it would look at first.
    assert escalation["summary"] == "Postgres's WAL archive is failing: the PBS datastore is full."
    # The model stated no impact: the blast radius it looked up, as the ledger recorded it.
    impact = escalation["impact"]
    assert impact.startswith("11 depend on service:postgres — directly: service:authentik, ")
    assert "through them: " in impact and "service:jellyseerr" in impact
    html = (await AsyncClient().get(f"/ui/s/{investigation.session_id}/")).content.decode()
    card = html[html.index('class="escalation-card') : html.index("</article>")]
    assert "the PBS datastore is full" in card and "Let me look at fleet health first." not in card
    assert "11 depend on service:postgres" in card


async def test_a_signal_and_a_health_drop_of_one_entity_together_are_one_investigation_fired_twice(
    llm: FakeAnthropic, oikos_settings: RunningSim, watcher_start
) -> None:
    llm.responder = lambda request: Reply.text("## Escalation\nSummary: sonarr's indexer times out")
    running = await watcher_start(_policy())

    # oikos_sim's first incident of the demo pulse: sonarr's signal fires and its health drops, in
    # the same millisecond.
    SCRIPT[0](oikos_settings.state.world, oikos_settings.state.events)
    handled = await running.handled_next(2)
    await running.investigations_done()

    assert [event.type for event, _ in handled] == ["signal.fired", "entity.health_changed"]
    assert [claim.outcome for _, claim in handled if claim] == ["opened", "suppressed"]
    (investigation,) = await database_sync_to_async(_investigations)()
    assert (investigation.entity, investigation.fired_count) == ("service:sonarr", 2)
    assert len(llm.requests) == 1  # one investigation's model call, not two
    page = (await AsyncClient().get("/ui/investigations/")).content.decode()
    assert page.count('class="investigation-row') == 1 and "\u00d72" in page  # the "times two" badge


def test_events_of_one_entity_join_within_the_incident_window_and_not_after_it() -> None:
    policy = _policy(incident_window_seconds=5.0)

    def claim(number: int, event_type: str, at: str, **data: str) -> int | None:
        found = services.event_claim(
            event_id=str(number), event_type=event_type, at=at, data={"slug": "service:gitea", **data}, policy=policy
        )
        assert found is not None
        return found.investigation_id

    first = claim(1, "signal.fired", "2026-12-01T03:00:00.000Z", kind="http_5xx", severity="warning")
    joined = claim(2, "entity.health_changed", "2026-12-01T03:00:04.000Z", to="degraded", reason="5xx")
    later = claim(3, "signal.fired", "2026-12-01T03:01:00.000Z", kind="disk_full", severity="critical")

    assert joined == first
    assert later not in (None, first)
    assert list(Investigation.objects.order_by("id").values_list("fired_count", flat=True)) == [2, 1]


async def test_ten_firings_within_the_cooldown_are_one_investigation(
    llm: FakeAnthropic, oikos_settings: RunningSim, watcher_start
) -> None:
    llm.responder = DegradedInvestigator()
    running = await watcher_start(_policy())
    world, events = oikos_settings.state.world, oikos_settings.state.events

    for _ in range(10):
        signal_fire(world, events, "service:sonarr", "http_timeout", "warning", "indexer timed out")
    handled = await running.handled_next(10)
    await running.investigations_done()

    assert [claim.outcome for _, claim in handled if claim] == ["opened"] + ["suppressed"] * 9
    (investigation,) = await database_sync_to_async(_investigations)()
    assert investigation.fired_count == 10
    assert len(llm.requests) == 3  # one investigation's model calls, not ten
    metrics = (await AsyncClient().get("/metrics")).content.decode()
    assert 'hermes_watch_events{outcome="opened"} 1.0' in metrics
    assert 'hermes_watch_events{outcome="suppressed"} 9.0' in metrics


async def test_a_storm_past_the_hourly_cap_is_one_storm_investigation(
    llm: FakeAnthropic, oikos_settings: RunningSim, watcher_start
) -> None:
    llm.responder = lambda request: Reply.text("## Escalation\nSummary: a storm")
    running = await watcher_start(_policy(hourly_cap=5), storm_gather=0.0)
    world, events = oikos_settings.state.world, oikos_settings.state.events

    for number in range(50):
        signal_fire(world, events, f"service:s{number}", "http_timeout", "warning", f"signal {number}")
    handled = await running.handled_next(50)
    await running.investigations_done()

    outcomes = [claim.outcome for _, claim in handled if claim]
    assert outcomes.count("opened") == 6 and outcomes.count("suppressed") == 44
    investigations = await database_sync_to_async(_investigations)()
    assert [i.storm for i in investigations] == [False] * 5 + [True]
    storm = investigations[-1]
    assert storm.fired_count == 45 and len(storm.storm_events) == 45
    assert len(llm.requests) == 6
    print(f"50 signals, cap 5: {len(investigations)} investigations, {len(llm.requests)} model calls")


async def test_a_resolved_signal_resolves_its_investigation_without_a_model_call(
    llm: FakeAnthropic, oikos_settings: RunningSim, watcher_start
) -> None:
    llm.responder = lambda request: Reply.text("## Escalation\nSummary: sonarr")
    running = await watcher_start(_policy())
    world, events = oikos_settings.state.world, oikos_settings.state.events
    signal_fire(world, events, "service:sonarr", "http_timeout", "warning", "x")
    await running.handled_next()
    await running.investigations_done()
    calls = len(llm.requests)

    signal_resolve(world, events, "service:sonarr", "http_timeout")
    ((event, claim),) = await running.handled_next()

    assert event.type == "signal.resolved" and claim is not None and claim.outcome == "resolved"
    (investigation,) = await database_sync_to_async(_investigations)()
    assert investigation.state == "resolved" and investigation.resolved_at is not None
    assert len(llm.requests) == calls


async def test_below_the_minimum_severity_nothing_opens(
    llm: FakeAnthropic, oikos_settings: RunningSim, watcher_start
) -> None:
    running = await watcher_start(_policy(exclude=("service:caddy",)))
    world, events = oikos_settings.state.world, oikos_settings.state.events
    signal_fire(world, events, "service:jellyfin", "transcode_fallback", "info", "software decoding")
    signal_fire(world, events, "service:caddy", "cert_expiring", "critical", "cert")

    handled = await running.handled_next(2)

    assert [claim.outcome for _, claim in handled if claim] == ["ignored", "ignored"]
    assert await database_sync_to_async(Investigation.objects.count)() == 0
    assert not llm.requests


@pytest.mark.parametrize("may_propose", [False, True])
async def test_investigations_are_read_only_unless_enabled(
    llm: FakeAnthropic, oikos_settings: RunningSim, watcher_start, settings: Settings, may_propose: bool
) -> None:
    settings.HERMES_INVESTIGATIONS_MAY_PROPOSE = may_propose
    requester = ExecutionRequester(target="service:jellyfin", action="deploy")

    def responder(request: dict) -> Reply:
        offered = [tool["name"] for tool in request.get("tools", [])]
        if any(name.endswith("request_execution") for name in offered):
            return requester(request)
        return Reply.text("## Escalation\nSummary: jellyfin\nNext step: deploy jellyfin (an operator must)")

    llm.responder = responder
    running = await watcher_start(_policy())
    signal_fire(oikos_settings.state.world, oikos_settings.state.events, "service:jellyfin", "x", "critical", "x")
    await running.handled_next()
    await running.investigations_done()

    offered = [tool["name"] for tool in llm.requests[0].body.get("tools", [])]
    assert any(name.endswith("request_execution") for name in offered) is may_propose
    executions = list(oikos_settings.state.desk.executions.values())
    (investigation,) = await database_sync_to_async(_investigations)()
    assert executions == []  # a proposal waits in Hermes: nothing reaches Oikos before an operator approves
    proposed = await database_sync_to_async(lambda: [(p.target, p.action, p.status) for p in Proposal.objects.all()])()
    if may_propose:
        assert proposed == [("service:jellyfin", "deploy", "pending")]
        assert [(p["target"], p["action"]) for p in investigation.escalation["proposals"]] == [
            ("service:jellyfin", "deploy")
        ]
    else:
        assert proposed == []
        assert executions == []
        assert investigation.escalation["approvals"] == []
        assert investigation.escalation["next_step"] == "deploy jellyfin (an operator must)"


async def test_without_a_model_the_investigation_is_recorded_as_skipped(
    oikos_settings: RunningSim, watcher_start, settings: Settings
) -> None:
    settings.ANTHROPIC_API_KEY = ""
    settings.ANTHROPIC_BASE_URL = ""
    running = await watcher_start(_policy())
    signal_fire(
        oikos_settings.state.world, oikos_settings.state.events, "service:sonarr", "http_timeout", "warning", "x"
    )
    await running.handled_next()
    await running.investigations_done()

    (investigation,) = await database_sync_to_async(_investigations)()
    assert (investigation.state, investigation.skipped_reason) == ("skipped", "llm_not_configured")
    metrics = (await AsyncClient().get("/metrics")).content.decode()
    assert 'hermes_investigations_skipped{reason="llm_not_configured"} 1.0' in metrics
