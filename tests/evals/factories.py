"""Eval runs, results and sessions made through the ORM, as the runner stores them."""

from __future__ import annotations

import datetime
from decimal import Decimal
from typing import Any

from django.utils import timezone

from agent.models import Activity, AgentSession, Message, Turn
from evals.models import EvalResult, EvalRun


def run_make(*, models: list[str], label: str = "", ago_minutes: int = 0, **fields: Any) -> EvalRun:
    run = EvalRun.objects.create(model_names=models, label=label, by="ci", status=EvalRun.Status.DONE, **fields)
    if ago_minutes:
        EvalRun.objects.filter(pk=run.pk).update(started_at=timezone.now() - datetime.timedelta(minutes=ago_minutes))
        run.refresh_from_db()
    return run


def result_make(run: EvalRun, *, case_id: str, model: str, score: float, **fields: Any) -> EvalResult:
    values: dict[str, Any] = {
        "case_digest": "aaaaaaaaaaaa",
        "case_tags": ["health"],
        "passed": score >= 1.0,
        "latency_ms": 2000,
        "tokens": 1000,
        "cost_usd": Decimal("0.01"),
        **fields,
    }
    return EvalResult.objects.create(run=run, case_id=case_id, model=model, score=score, **values)


def session_answered(
    *, questions: list[str], answer: str = "sonarr is degraded", calls: list[dict[str, Any]] | None = None
) -> tuple[AgentSession, list[Turn]]:
    """A finished session: each question answered; `calls` (server, tool, arguments, text, is_error)
    are ledger rows of the first turn, with the tool_use blocks the transcript shows."""
    session = AgentSession.objects.create(actor="operator:alice", title="What is degraded")
    turns = []
    for index, question in enumerate(questions):
        turn = Turn.objects.create(session=session, actor="operator:alice", status=Turn.Status.DONE, model="m")
        Message.objects.create(session=session, turn=turn, role="user", content=[{"type": "text", "text": question}])
        for number, call in enumerate(calls or [] if index == 0 else []):
            tool_use_id = f"toolu_{index}_{number}"
            Message.objects.create(
                session=session,
                turn=turn,
                role="assistant",
                content=[{"type": "tool_use", "id": tool_use_id, "name": call["tool"], "input": call["arguments"]}],
            )
            Message.objects.create(
                session=session,
                turn=turn,
                role="user",
                content=[{"type": "tool_result", "tool_use_id": tool_use_id, "content": call["text"]}],
            )
            Activity.objects.create(
                correlation_id=turn.id,
                session=session,
                actor="operator:alice",
                tool_use_id=tool_use_id,
                server=call.get("server", "oikos"),
                tool=call["tool"],
                arguments=call["arguments"],
                result={"content": [{"type": "text", "text": call["text"]}], "is_error": call.get("is_error", False)},
                state=Activity.State.ERROR if call.get("is_error") else Activity.State.OK,
                is_error=call.get("is_error", False),
                started_at=timezone.now(),
            )
        Message.objects.create(
            session=session, turn=turn, role="assistant", content=[{"type": "text", "text": f"{answer} ({index})"}]
        )
        turns.append(turn)
    return session, turns
