"""The small records the turn loop's parts share: a stop request, an unknown outcome, a ledger call."""

from __future__ import annotations

import uuid

import pytest
from django.utils import timezone

from agent.conversation.outcomes import CUTOFF_CANCELLED, CUTOFF_INTERRUPTED, CUTOFF_TIME_LIMIT, ToolOutcome
from agent.engine.stop import StopRequest
from agent.models import Activity
from agent.store import ledger


class TestStopRequest:
    def test_a_stop_before_the_loop_begins_is_kept_for_its_first_step(self) -> None:
        stop = StopRequest()
        assert stop.cancel_request(None, already_cancelling=False) is False
        assert stop.begin() is True

    def test_a_stop_after_the_loop_began_cancels_the_task(self) -> None:
        stop = StopRequest()
        assert stop.begin() is False
        assert stop.cancel_request(None, already_cancelling=False) is True
        assert (stop.reason, stop.cause) == ("Cancelled by the operator.", CUTOFF_CANCELLED)

    def test_the_first_cancel_s_reason_stands(self) -> None:
        stop = StopRequest()
        stop.cancel_request("Cancelled by the peer.", already_cancelling=False)
        stop.cancel_request("Cancelled by someone else.", already_cancelling=False)
        assert stop.reason == "Cancelled by the peer."
        assert stop.cause.words == "cancelled by the peer while the call was in flight"

    def test_a_reason_given_while_a_cancel_is_under_way_is_ignored(self) -> None:
        stop = StopRequest(begun=True)
        assert stop.cancel_request("Cancelled by the peer.", already_cancelling=True) is True
        assert stop.reason == "Cancelled by the operator."

    def test_an_interrupt_names_its_reason_and_cuts_calls_off_as_interrupted(self) -> None:
        stop = StopRequest()
        stop.interrupt_request("Hermes was stopped while answering.")
        assert (stop.interrupted, stop.cause) == ("Hermes was stopped while answering.", CUTOFF_INTERRUPTED)


def test_an_unknown_outcome_is_an_error_that_may_have_run() -> None:
    outcome = ToolOutcome.unknown(tool="mcp__oikos__request_execution", cause=CUTOFF_TIME_LIMIT, duration_ms=12)
    text = outcome.content[0]["text"]
    assert text.startswith("Outcome unknown: the turn's time limit was reached") and "get_execution" in text
    assert (outcome.state, outcome.is_error, outcome.duration_ms) == ("unknown", True, 12)
    assert outcome.record["error"] == {"kind": "time_limit", "message": text}


@pytest.mark.django_db
def test_a_ledger_call_starts_a_row_that_says_started() -> None:
    call = ledger.LedgerCall(
        correlation_id=uuid.uuid4(),
        session_id=None,
        actor="operator:test",
        tool_use_id="toolu_1",
        server="oikos",
        tool="get_health_summary",
        arguments={"scope": "all"},
        started_at=timezone.now(),
    )
    row = Activity.objects.get(pk=ledger.activity_start(call=call))
    assert (row.state, row.tool, row.arguments, row.correlation_id) == (
        "started",
        call.tool,
        {"scope": "all"},
        call.correlation_id,
    )
