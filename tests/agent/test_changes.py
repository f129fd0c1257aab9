"""Hermes's record of the executions it asked for (`agent.store.changes`): written when Oikos
accepts a request, kept current from what Oikos says, its follow-up claimed exactly once."""

from __future__ import annotations

import threading
import uuid

import pytest
from channels.db import database_sync_to_async
from django.db import connection

from agent.models import Change
from agent.proposals import undo_propose
from agent.store.changes import (
    ChangeRequest,
    change_record,
    change_status,
    followup_claim,
    verdict_record,
)
from agent.tools import ToolHub
from oikos_sim.server import RunningSim
from tests.agent.conftest import ask
from tests.fakes import FakeAnthropic
from tests.fakes.scripted_models import ExecutionRequester

pytestmark = pytest.mark.django_db(transaction=True)


def _request(execution_id: str = "x-1", **overrides: object) -> ChangeRequest:
    fields: dict[str, object] = {
        "execution_id": execution_id,
        "approval_id": "",
        "action": "restart",
        "target": "service:sonarr",
        "params": {},
        "reason": "degraded",
        "risk_class": "reversible_low",
        "status": "running",
        "asked_by": "operator:alice",
    }
    return ChangeRequest(**{**fields, **overrides})  # type: ignore[arg-type]


async def test_a_restart_oikos_ran_is_on_the_record_with_where_it_was_asked(
    llm: FakeAnthropic, oikos_hub: ToolHub, oikos_settings: RunningSim
) -> None:
    llm.responder = ExecutionRequester(target="service:caddy", action="restart")

    handle, _ = await ask("restart caddy", oikos_hub)

    (change,) = await database_sync_to_async(list)(Change.objects.all())
    (execution,) = oikos_settings.state.desk.executions.values()
    assert (change.execution_id, change.target, change.action) == (execution.id, "service:caddy", "restart")
    assert (change.session_id, change.correlation_id, change.asked_by) == (
        handle.session_id,
        handle.turn_id,
        "operator:test",
    )
    assert change.status == "completed" and change.followup == Change.FollowUp.PENDING
    assert change.activity_id is not None


async def test_a_parked_deploy_is_on_the_record_as_proposed(
    llm: FakeAnthropic, oikos_hub: ToolHub, oikos_settings: RunningSim
) -> None:
    llm.responder = ExecutionRequester(target="service:jellyfin", action="deploy")

    await ask("deploy jellyfin", oikos_hub)

    (change,) = await database_sync_to_async(list)(Change.objects.all())
    assert (change.action, change.status, change.risk_class) == ("deploy", "proposed", "config_mutation")
    assert change.approval_id in oikos_settings.state.desk.approvals


def test_a_request_without_an_execution_id_is_not_a_change() -> None:
    assert ChangeRequest.of_result(arguments={}, structured={"error": "unknown action"}, asked_by="a") is None
    assert ChangeRequest.of_result(arguments={}, structured=None, asked_by="a") is None


def test_recording_twice_keeps_one_row() -> None:
    change_record(_request())
    change_record(_request(reason="again"))

    assert [c.reason for c in Change.objects.all()] == ["degraded"]


def test_a_finished_execution_stays_finished_and_a_denied_one_is_not_followed_up() -> None:
    change_record(_request("x-1"))
    change_record(_request("x-2", status="proposed"))

    change_status(execution_id="x-1", status="completed")
    late = change_status(execution_id="x-1", status="running")
    denied = change_status(execution_id="x-2", status="denied", decided_by="operator:bob")

    assert late is not None and late.status == "completed" and late.finished_at is not None
    assert denied is not None and (denied.followup, denied.decided_by) == (Change.FollowUp.SKIPPED, "operator:bob")
    assert change_status(execution_id="not-ours", status="completed") is None


def test_a_follow_up_is_claimed_once_and_only_when_the_execution_finished() -> None:
    change_record(_request())
    assert followup_claim(execution_id="x-1", instance=uuid.uuid4()) is None  # still running
    change_status(execution_id="x-1", status="completed")

    winners: list[Change] = []

    def claim() -> None:
        try:
            if (change := followup_claim(execution_id="x-1", instance=uuid.uuid4())) is not None:
                winners.append(change)
        finally:
            connection.close()

    threads = [threading.Thread(target=claim) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert len(winners) == 1 and winners[0].followup == Change.FollowUp.CLAIMED


def test_a_verdict_ends_the_follow_up_and_an_unknown_one_is_refused() -> None:
    change_record(_request())
    change_status(execution_id="x-1", status="completed")

    change = verdict_record(execution_id="x-1", verdict="cleared", detail="sonarr healthy")

    assert change is not None and (change.verdict, change.followup) == ("cleared", Change.FollowUp.DONE)
    with pytest.raises(ValueError, match="one of cleared, not_cleared, failed"):
        verdict_record(execution_id="x-1", verdict="fine", detail="")


def test_a_completed_deploy_offers_its_rollback_once_and_a_restart_or_a_failed_deploy_none() -> None:
    change_record(_request("x-1", action="deploy", target="service:jellyfin"))
    change_record(_request("x-2", action="restart"))
    change_record(_request("x-3", action="deploy"))
    for execution_id, status in (("x-1", "completed"), ("x-2", "completed"), ("x-3", "failed")):
        change_status(execution_id=execution_id, status=status)

    first = undo_propose(execution_id="x-1", proposed_by="agent:hermes")
    again = undo_propose(execution_id="x-1", proposed_by="operator:alice")

    assert first is not None and again is not None and first.id == again.id
    assert (first.target, first.action, first.status) == ("service:jellyfin", "rollback", "pending")
    assert Change.objects.get(execution_id="x-1").undo_proposal_id == uuid.UUID(first.id)
    assert undo_propose(execution_id="x-2", proposed_by="agent:hermes") is None
    assert undo_propose(execution_id="x-3", proposed_by="agent:hermes") is None
