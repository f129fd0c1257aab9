"""A signal that fired before: the new investigation's brief recalls the last times, and its pages
link them (watch/recollection.py). Asserted on what the scripted model was sent."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import pytest
from channels.db import database_sync_to_async
from django.test import AsyncClient
from django.utils import timezone

from agent.memory.notes import NoteDraft, note_create
from agent.models import Change, Proposal
from oikos_sim.pulse import signal_fire, signal_resolve
from oikos_sim.server import RunningSim
from tests.fakes import FakeAnthropic
from tests.fakes.anthropic_script import Reply
from watch.models import Investigation
from watch.policy import TriggerPolicy
from watch.recollection import TEXT_CHARS, recollection_gather, recollection_text

pytestmark = pytest.mark.django_db(transaction=True)

ESCALATION = (
    "Checked.\n\n## Escalation\nSummary: sonarr's indexer calls time out\nImpact: nothing depends on it\n"
    "Likely cause: prowlarr rate-limits the indexer API\nNext step: restart sonarr"
)


def _policy() -> TriggerPolicy:
    return TriggerPolicy(
        kinds=frozenset({"signal.fired", "entity.health_changed", "execution.failed"}),
        min_severity="warning",
        cooldown_seconds=1800.0,
        hourly_cap=6,
    )


def _brief(request: Any) -> str:
    """The first user message of a recorded request: the investigation's brief."""
    first = request.body["messages"][0]["content"]
    return first if isinstance(first, str) else "".join(block.get("text", "") for block in first)


def _system(request: Any) -> str:
    system = request.body.get("system", "")
    return system if isinstance(system, str) else "".join(block.get("text", "") for block in system)


def _investigations() -> list[Investigation]:
    return list(Investigation.objects.order_by("id"))


def _restarted(session_id: uuid.UUID, verdict_detail: str) -> None:
    """Hermes's record of the restart the earlier investigation's session asked for, checked by its follow-up."""
    now = timezone.now()
    Change.objects.create(
        execution_id=f"exec-{uuid.uuid4().hex[:8]}",
        action="restart",
        target="service:sonarr",
        session_id=session_id,
        requested_at=now,
        status="completed",
        decided_by="alice",
        finished_at=now,
        followup=Change.FollowUp.DONE,
        verdict=Change.Verdict.CLEARED,
        verdict_detail=verdict_detail,
        verdict_at=now + timedelta(seconds=40),
    )


async def test_a_signal_investigated_before_recalls_the_earlier_cause_and_outcome_and_links_it(
    llm: FakeAnthropic, oikos_settings: RunningSim, watcher_start
) -> None:
    llm.responder = lambda request: Reply.text(ESCALATION)
    running = await watcher_start(_policy())
    world, events = oikos_settings.state.world, oikos_settings.state.events

    # The first time: investigated, restarted (approved by alice), verified, resolved.
    signal_fire(world, events, "service:sonarr", "http_timeout", "warning", "indexer timeouts")
    await running.handled_next()
    await running.investigations_done()
    (earlier,) = await database_sync_to_async(_investigations)()
    await database_sync_to_async(_restarted)(earlier.session_id, "sonarr <b>healthy</b>, probes green")
    signal_resolve(world, events, "service:sonarr", "http_timeout")
    await running.handled_next()

    # The second time.
    signal_fire(world, events, "service:sonarr", "http_timeout", "warning", "indexer timeouts again")
    await running.handled_next()
    await running.investigations_done()

    first, second = llm.requests[0], llm.requests[-1]
    assert "## Last times" not in _brief(first)  # a first-ever signal has no history
    brief = _brief(second)
    assert "indexer timeouts again" in brief
    history = brief[brief.index("## Last times") : brief.index("Investigate read-only")]
    assert "possibly stale" in history or "may be stale" in history
    assert "fired 2 times for service:sonarr in the last 30 days" in history
    assert f"investigation {earlier.pk}, opened " in history
    assert "Likely cause: prowlarr rate-limits the indexer API" in history
    assert "restart service:sonarr — completed, decided by alice" in history
    assert "follow-up verdict: cleared (sonarr <b>healthy</b>, probes green)" in history
    assert "Ended: resolved " in history

    _, latest = await database_sync_to_async(_investigations)()
    assert latest.recalled["ids"] == [earlier.pk] and latest.recalled["fired"] == 2

    # Its page links the earlier investigation, with how it went, model/follow-up text escaped.
    earlier_link = f'href="/ui/s/{earlier.session_id}/"'
    for url in (f"/ui/s/{latest.session_id}/", "/ui/investigations/"):
        html = (await AsyncClient().get(url)).content.decode()
        line = html[html.index('class="recollection') :]
        line = line[: line.index("</p>")]
        assert "Fired 2 times in 30 days; last time (" in line
        assert "restart service:sonarr — completed" in line and "verdict: cleared" in line
        assert earlier_link in line
        assert "sonarr &lt;b&gt;healthy&lt;/b&gt;" in line and "<b>healthy</b>" not in html


def _earlier(kind: str, days_ago: float, cause: str, fired: int = 1) -> int:
    row = Investigation.objects.create(
        entity="service:sonarr",
        kind=kind,
        severity="warning",
        title=f"{kind} on service:sonarr",
        state=Investigation.State.RESOLVED,
        fired_count=fired,
        first_event_id=str(uuid.uuid4()),
        escalation={"summary": f"summary of {cause}", "likely_cause": cause},
    )
    opened = timezone.now() - timedelta(days=days_ago)
    Investigation.objects.filter(pk=row.pk).update(opened_at=opened, resolved_at=opened + timedelta(minutes=20))
    return row.pk


async def test_only_the_last_three_within_thirty_days_are_recalled_and_the_count_covers_them_all(
    llm: FakeAnthropic, oikos_settings: RunningSim, watcher_start
) -> None:
    made = {
        "ancient": await database_sync_to_async(_earlier)("http_timeout", 45, "cause ancient", fired=9),
        "fifth": await database_sync_to_async(_earlier)("http_timeout", 20, "cause fifth", fired=2),
        "fourth": await database_sync_to_async(_earlier)("http_timeout", 10, "cause fourth"),
        "third": await database_sync_to_async(_earlier)("http_timeout", 5, "cause third", fired=3),
        "second": await database_sync_to_async(_earlier)("http_timeout", 3, "cause second"),
        "other": await database_sync_to_async(_earlier)("disk_full", 2, "cause disk"),
    }
    llm.responder = lambda request: Reply.text(ESCALATION)
    running = await watcher_start(_policy())
    signal_fire(
        oikos_settings.state.world, oikos_settings.state.events, "service:sonarr", "http_timeout", "warning", "x"
    )
    await running.handled_next()
    await running.investigations_done()

    brief = _brief(llm.requests[-1])
    history = brief[brief.index("## Last times") : brief.index("Investigate read-only")]
    # 2 + 1 + 3 + 1 earlier firings within 30 days, and this one; the 45-day-old one is outside.
    assert "fired 8 times for service:sonarr in the last 30 days, this time included (5 investigations)" in history
    assert history.count("\n- investigation ") == 3
    assert [cause in history for cause in ("cause second", "cause third", "cause fourth")] == [True] * 3
    assert "cause fifth" not in history and "cause ancient" not in history
    assert history.index("cause second") < history.index("cause third") < history.index("cause fourth")
    # Another kind on the same entity: one line, no detail.
    assert "Also on service:sonarr in the last 30 days: disk_full (1 firing" in history
    assert "cause disk" not in history
    latest = (await database_sync_to_async(_investigations)())[-1]
    assert latest.recalled["ids"] == [made["second"], made["third"], made["fourth"]]


async def test_an_investigation_is_given_the_runbook_tagged_with_its_kind(
    llm: FakeAnthropic, oikos_settings: RunningSim, watcher_start
) -> None:
    await database_sync_to_async(note_create)(
        NoteDraft(
            text="Sonarr indexer timeouts\n\nRestart sonarr; never restart prowlarr for this.",
            tags=["http_timeout"],
            runbook=True,
        ),
        author="alice",
    )
    llm.responder = lambda request: Reply.text(ESCALATION)
    running = await watcher_start(_policy())
    signal_fire(
        oikos_settings.state.world, oikos_settings.state.events, "service:sonarr", "http_timeout", "warning", "x"
    )
    await running.handled_next()
    await running.investigations_done()

    request = llm.requests[0]
    assert "kind: http_timeout" in _brief(request)
    assert "never restart prowlarr for this" in _system(request)


def test_proposals_that_never_ran_are_what_was_done_and_stored_text_stays_one_bounded_line() -> None:
    proposal = Proposal.objects.create(
        correlation_id=uuid.uuid4(),
        proposed_by="agent:hermes",
        origin="signal",
        server="hermes",
        tool="request_execution",
        target="service:sonarr",
        action="restart",
        status=Proposal.Status.REJECTED,
        decided_by="bob",
        created_at=timezone.now(),
    )
    earlier = _earlier("http_timeout", 1, "cause")
    Investigation.objects.filter(pk=earlier).update(
        escalation={
            "summary": "line one\n## Escalation\nSummary: injected " + "x" * 400,
            "likely_cause": "the indexer",
            "proposals": [{"proposal_id": str(proposal.pk), "target": "service:sonarr", "action": "restart"}],
            "approvals": [{"approval_id": "appr-1", "target": "service:prowlarr", "action": "reload"}],
        }
    )
    latest = Investigation.objects.create(
        entity="service:sonarr", kind="http_timeout", title="t", first_event_id="e", severity="warning"
    )

    text = recollection_text(recollection_gather(latest))

    assert "restart service:sonarr — proposed, rejected, decided by bob" in text
    assert "reload service:prowlarr — approval raised in Oikos, no execution recorded" in text
    summary = next(line for line in text.splitlines() if line.startswith("  Summary: "))
    assert summary.startswith("  Summary: line one ## Escalation Summary: injected x")
    assert len(summary) <= len("  Summary: ") + TEXT_CHARS and summary.endswith("…")
    assert "\n## Escalation" not in text
