"""Where Hermes's record of an execution shows (`oikos.change_view`): the verdict line and the Undo
button on approval cards and on the chips of executions that ran without one, redrawn live."""

from __future__ import annotations

import datetime
import json
import uuid

import pytest
from channels.db import database_sync_to_async
from channels.layers import BaseChannelLayer
from django.template.loader import render_to_string
from django.test import AsyncClient, Client
from django.utils import timezone

from agent.broadcast import changes_changed_publish
from agent.models import AgentSession, Change, Proposal, Turn
from agent.store import ledger
from agent.store.changes import (
    ChangeRequest,
    change_record,
    change_status,
    followup_claim,
    followup_skip,
    followup_started,
    verdict_record,
)
from common.dom import change_dom_class
from controlroom import fragments
from controlroom.feeds import Page
from oikos.change_view import change_view_get
from oikos.rail import ApprovalState
from oikos.relay import oikos_relay
from oikos_sim.server import RunningSim
from tests.controlroom.conftest import Connect
from transcript.view import ToolItem, TurnView

pytestmark = pytest.mark.django_db(transaction=True)

HTMX = {"HX-Request": "true"}


def _session() -> AgentSession:
    return AgentSession.objects.create(actor="operator:test", title="restarts")


def _change(
    execution_id: str, *, action: str = "restart", session: AgentSession | None = None, activity_id: int | None = None
) -> Change:
    return change_record(
        ChangeRequest(
            execution_id=execution_id,
            approval_id=f"apr-{execution_id}",
            action=action,
            target="service:sonarr",
            params={},
            reason="degraded",
            risk_class="reversible_low",
            status="running",
            asked_by="operator:alice",
            session_id=session.id if session else None,
            activity_id=activity_id,
        )
    )


def _finished(execution_id: str, *, status: str = "completed", **kwargs: object) -> Change:
    change = _change(execution_id, **kwargs)  # type: ignore[arg-type]
    finished = timezone.now() - datetime.timedelta(seconds=40)
    change_status(execution_id=execution_id, status=status, finished_at=finished, error="disk full")
    return change


def _verdict(execution_id: str, verdict: str, session: AgentSession) -> Turn:
    turn = Turn.objects.create(session=session, actor="agent:hermes", status=Turn.Status.DONE)
    assert followup_claim(execution_id=execution_id, instance=None) is not None
    followup_started(execution_id=execution_id, turn_id=turn.id)
    verdict_record(execution_id=execution_id, verdict=verdict, detail="sonarr answers its probe")
    # Forty seconds after the execution ended, whatever the machine's speed.
    change = Change.objects.get(execution_id=execution_id)
    assert change.finished_at is not None
    Change.objects.filter(pk=change.pk).update(verdict_at=change.finished_at + datetime.timedelta(seconds=40))
    return turn


def _record_html(client: Client, execution_id: str) -> str:
    return client.get(f"/ui/executions/{execution_id}/record/").content.decode()


@pytest.mark.parametrize(
    ("verdict", "words"), [("cleared", "cleared"), ("not_cleared", "not cleared"), ("failed", "failed")]
)
def test_a_verdict_says_what_the_follow_up_found_how_long_after_and_links_to_it(
    client: Client, verdict: str, words: str
) -> None:
    session = _session()
    _finished("x-1", session=session)
    turn = _verdict("x-1", verdict, session)

    html = _record_html(client, "x-1")

    assert f'<p class="change-verdict verdict-{verdict}">verified: {words} 40 s after' in html
    link = f'<a class="change-followup-link" href="/ui/s/{session.id}/#turn-{turn.id}">'
    assert link in html
    assert "sonarr answers its probe" in html
    # The anchor is the follow-up turn's own id in the transcript.
    page = client.get(f"/ui/s/{session.id}/").content.decode()
    assert f'id="turn-{turn.id}"' in page


def test_while_the_follow_up_runs_the_card_says_checking_and_a_skipped_one_says_why(client: Client) -> None:
    _finished("x-1")
    _finished("x-2")
    followup_claim(execution_id="x-1", instance=None)
    followup_skip(execution_id="x-2", reason="today's budget is spent")

    assert '<p class="change-verdict verdict-checking">checking…' in _record_html(client, "x-1")
    assert '<p class="change-verdict verdict-skipped">not checked: today&#x27;s budget is spent' in _record_html(
        client, "x-2"
    )


def test_a_denied_execution_is_not_checked_and_offers_no_undo(client: Client) -> None:
    _change("x-1", action="deploy")
    change_status(execution_id="x-1", status="denied", decided_by="bob")

    html = _record_html(client, "x-1")

    assert "not checked: The execution was denied" in html
    assert "change-undo" not in html


def test_only_a_completed_deploy_offers_undo_then_says_offered_then_undone(client: Client) -> None:
    _finished("deploy-ok", action="deploy")
    _finished("deploy-failed", action="deploy", status="failed")
    _finished("restart-ok", action="restart")

    assert 'class="change-undo"' in _record_html(client, "deploy-ok")
    assert 'class="change-undo"' not in _record_html(client, "deploy-failed")
    assert 'class="change-undo"' not in _record_html(client, "restart-ok")

    response = client.post("/ui/executions/undo/", {"execution_id": "deploy-ok"}, headers=HTMX)
    assert response.status_code == 200
    proposal = Proposal.objects.get()
    assert f'<a class="change-undo-link" href="/ui/approvals/#proposal-{proposal.id}">' in response.content.decode()
    assert 'class="change-undo"' not in _record_html(client, "deploy-ok")

    # Approving the proposal sends the rollback to Oikos; its change records what it undoes.
    change_record(
        ChangeRequest(
            execution_id="rollback-1",
            approval_id="",
            action="rollback",
            target="service:sonarr",
            params={},
            reason="undo",
            risk_class="reversible_low",
            status="running",
            asked_by="operator",
            proposal_id=proposal.id,
        )
    )
    assert "undone by <code>rollback-1</code>" in _record_html(client, "deploy-ok")
    assert "undoes <code>rollback-1</code>" not in _record_html(client, "deploy-ok")
    assert "undoes <code>deploy-ok</code>" in _record_html(client, "rollback-1")


def test_undo_is_refused_for_what_cannot_be_rolled_back(client: Client) -> None:
    _finished("restart-ok", action="restart")
    assert client.post("/ui/executions/undo/", {"execution_id": "restart-ok"}, headers=HTMX).status_code == 400
    assert client.post("/ui/executions/undo/", {"execution_id": "nowhere"}, headers=HTMX).status_code == 400
    assert not Proposal.objects.exists()


async def test_the_undo_button_opens_a_proposal_and_nothing_reaches_oikos(
    memory_layer: BaseChannelLayer, oikos_settings: RunningSim
) -> None:
    await database_sync_to_async(_finished)("deploy-ok", action="deploy")
    before = set(oikos_settings.state.desk.executions)

    first = await AsyncClient().post("/ui/executions/undo/", {"execution_id": "deploy-ok"}, headers=HTMX)
    second = await AsyncClient().post("/ui/executions/undo/", {"execution_id": "deploy-ok"}, headers=HTMX)

    assert first.status_code == second.status_code == 200
    (proposal,) = [p async for p in Proposal.objects.all()]
    assert (proposal.status, proposal.proposed_by, proposal.tool) == ("pending", "operator", "request_execution")
    assert proposal.arguments["action"] == "rollback"
    assert set(oikos_settings.state.desk.executions) == before


def test_an_approval_card_shows_the_record_it_carries_or_fetches_it_once_drawn() -> None:
    _finished("x-1")
    card = ApprovalState(approval_id="apr-x-1", execution_id="x-1", status="approved", execution_status="completed")

    fetching = fragments.approval_cards_replace([card])
    card.record = change_view_get("x-1")
    carried = fragments.approval_cards_replace([card])

    assert 'hx-get="/ui/executions/x-1/record/"' in fetching
    assert '<p class="change-verdict verdict-pending">to be checked</p>' in carried
    # A card still waiting for approval has nothing of the kind.
    pending = ApprovalState(approval_id="apr-x-2", execution_id="x-2")
    assert "change-record" not in fragments.approval_cards_replace([pending])


def _chip_item(result: dict[str, object]) -> ToolItem:
    return ToolItem(
        tool_use_id="toolu_1",
        name="oikos__request_execution",
        server="oikos",
        tool="request_execution",
        input={},
        done=True,
        result=json.dumps(result),
    )


def _chip_view(turn_id: uuid.UUID, result: dict[str, object]) -> TurnView:
    view = TurnView(turn_id=str(turn_id), session_id=str(uuid.uuid4()), question="restart sonarr", status="done")
    view.items.append(_chip_item(result))
    return view


def _chip(result: dict[str, object]) -> str:
    item = _chip_item(result)
    return render_to_string(
        "controlroom/partials/tool_chip.html", {"item": item, "turn": {"turn_id": str(uuid.uuid4())}, "oob": ""}
    )


def test_an_execution_that_ran_without_approval_shows_its_record_on_its_chip(client: Client) -> None:
    ran = _chip({"execution_id": "x-1", "status": "running", "needs_approval": False})
    parked = _chip({"execution_id": "x-2", "approval_id": "apr-2", "status": "proposed", "needs_approval": True})

    assert f'class="change-record {change_dom_class("x-1")}"' in ran
    # A target for the live redraw; the transcript has htmx disabled, so the feed brings the record.
    assert "hx-get" not in ran
    # Parked for approval: its approval card shows the record, not the chip.
    assert "change-record" not in parked


async def test_a_page_showing_the_session_redraws_the_record_when_it_changes(
    memory_layer: BaseChannelLayer, socket: Connect
) -> None:
    session = await database_sync_to_async(_session)()
    other = await database_sync_to_async(_session)()
    await database_sync_to_async(_finished)("x-1", session=session)
    await database_sync_to_async(_finished)("x-2", session=other)
    frames = await socket(f"/ws/ui/?session={session.id}")
    await frames.until(lambda frame: "turn-controls" in frame)

    await database_sync_to_async(_verdict)("x-2", "cleared", other)
    await changes_changed_publish(execution_id="x-2", session_id=other.id)
    await database_sync_to_async(_verdict)("x-1", "cleared", session)
    await changes_changed_publish(execution_id="x-1", session_id=session.id)

    frame = await frames.until(lambda frame: "change-verdict" in frame)
    assert f'<template data-replaces=".{change_dom_class("x-1")}">' in frame
    assert "verified: cleared" in frame
    # The other session's record is not this page's business.
    assert change_dom_class("x-2") not in frames.text()


async def test_the_chip_of_an_execution_that_ran_at_once_carries_its_verdict_into_the_page(
    memory_layer: BaseChannelLayer,
) -> None:
    session = await database_sync_to_async(_session)()
    await database_sync_to_async(_finished)("x-1", session=session)
    turn = await database_sync_to_async(_verdict)("x-1", "cleared", session)
    view = _chip_view(turn.id, {"execution_id": "x-1", "status": "running", "needs_approval": False})

    async def send(parts: list[str]) -> None:
        return None

    page = Page(channel_name="test", relay=oikos_relay(), send=send)
    await page.chips_load([view])
    html = fragments.turn_html(view, {})

    assert '<p class="change-verdict verdict-cleared">verified: cleared 40 s after' in html


def test_the_ledger_row_of_a_request_execution_shows_its_status_and_verdict(client: Client) -> None:
    session = _session()
    call = ledger.activity_record(
        call=ledger.LedgerCall(
            correlation_id=uuid.uuid4(),
            session_id=session.id,
            actor="operator:test",
            tool_use_id="toolu_1",
            server="oikos",
            tool="request_execution",
            arguments={"target": "service:sonarr", "action": "restart"},
            started_at=timezone.now(),
        ),
        result={"execution_id": "x-1"},
        is_error=False,
        duration_ms=5,
    )
    _finished("x-1", session=session, activity_id=call)
    turn = _verdict("x-1", "not_cleared", session)

    html = client.get("/ui/ledger/").content.decode()

    assert "<code>x-1</code> completed · " in html
    assert "verified not cleared 40 s after" in html
    assert f'href="/ui/s/{session.id}/#turn-{turn.id}"' in html


def test_metrics_count_executions_by_verdict_and_status(client: Client) -> None:
    session = _session()
    for execution_id in ("c-1", "c-2", "n-1"):
        _finished(execution_id, session=session)
    _verdict("c-1", "cleared", session)
    _verdict("c-2", "cleared", session)
    _verdict("n-1", "not_cleared", session)
    _finished("f-1", status="failed")
    _verdict("f-1", "failed", session)
    _finished("k-1")
    followup_claim(execution_id="k-1", instance=None)
    _finished("s-1")
    followup_skip(execution_id="s-1", reason="no model configured")
    _change("r-1")

    metrics = client.get("/metrics").content.decode()

    assert 'hermes_executions{status="completed",verdict="cleared"} 2.0' in metrics
    assert 'hermes_executions{status="completed",verdict="not_cleared"} 1.0' in metrics
    assert 'hermes_executions{status="failed",verdict="failed"} 1.0' in metrics
    assert 'hermes_executions{status="completed",verdict="checking"} 1.0' in metrics
    assert 'hermes_executions{status="completed",verdict="unchecked"} 1.0' in metrics
    assert 'hermes_executions{status="running",verdict="pending"} 1.0' in metrics


def test_an_investigation_whose_action_cleared_it_says_so_on_its_card_and_in_the_list(client: Client) -> None:
    from watch.models import Investigation

    session = _session()
    Investigation.objects.create(
        session=session,
        entity="service:sonarr",
        kind="http_timeout",
        severity="warning",
        title="warning: http_timeout on service:sonarr",
        first_event_id="7",
        event={"id": "7", "type": "signal.fired"},
        escalation={"summary": "sonarr times out"},
    )
    _finished("x-1", session=session)
    turn = _verdict("x-1", "cleared", session)

    listing = client.get("/ui/investigations/").content.decode()
    page = client.get(f"/ui/s/{session.id}/").content.decode()

    said = "action cleared it: restart <code>service:sonarr</code>, verified cleared"
    assert said in listing
    assert said in page.split('id="escalation-card"', 1)[1]
    assert f'href="/ui/s/{session.id}/#turn-{turn.id}"' in listing
