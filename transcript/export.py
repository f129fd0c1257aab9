"""A session as an incident note's facts: what was asked, what Hermes did and said, who decided.

`session_export` reads the session once into plain data (`SessionExport`), which `as_json` hands to
tools and `transcript.export_markdown` writes as a Markdown note. It reads the transcript as the
control room shows it (`selectors.session_turn_views`: thinking left out, tool results as the model
saw them), adds the ledger's timings and the approval decisions Hermes recorded, and bounds each
tool result (`RESULT_CHARS`): the ledger keeps them whole.
"""

from __future__ import annotations

import datetime
import uuid
from dataclasses import asdict, dataclass, field
from decimal import Decimal
from typing import Any

from agent.models import AgentSession, Turn
from oikos.models import ApprovalDecision
from transcript.selectors import session_turn_views
from transcript.view import ApprovalItem, NoticeItem, TextItem, ToolItem

RESULT_CHARS = 2000
# Every turn, however long the session (the control room shows the latest 200).
TURNS_MAX = 100_000


@dataclass(frozen=True)
class DecisionFact:
    operator: str
    decision: str
    outcome: str
    decided_at: datetime.datetime
    reason: str
    detail: str


@dataclass(frozen=True)
class ToolCallFact:
    server: str
    tool: str
    arguments: dict[str, Any]
    state: str
    duration_ms: int
    result: str
    # False when `result` is only the start of it (the ledger keeps the whole result).
    result_complete: bool


@dataclass(frozen=True)
class ApprovalFact:
    approval_id: str
    execution_id: str
    target: str
    action: str
    risk_class: str
    # What Oikos said when the execution was requested (usually pending).
    status_requested: str
    message: str
    # Decisions attempted from Hermes's control room, oldest first; empty when none was recorded here.
    decisions: list[DecisionFact]


@dataclass(frozen=True)
class StepFact:
    """One thing a turn did, in order: said something, called a tool, raised an approval, stopped."""

    kind: str  # answer | tool_call | approval | notice
    text: str = ""
    tool_call: ToolCallFact | None = None
    approval: ApprovalFact | None = None


@dataclass(frozen=True)
class TurnFact:
    correlation_id: uuid.UUID
    asked_by: str
    question: str
    started_at: datetime.datetime
    finished_at: datetime.datetime | None
    status: str
    stop_reason: str
    model: str
    usage: dict[str, int]
    tokens_total: int
    cost_usd: Decimal | None
    steps: list[StepFact]


@dataclass(frozen=True)
class SessionExport:
    id: uuid.UUID
    title: str
    actor: str
    origin: str
    created_at: datetime.datetime
    last_active_at: datetime.datetime
    turns: list[TurnFact]
    tokens_total: int
    # The sum of every turn's cost; None when some turn's price is unknown.
    cost_usd: Decimal | None
    usage: dict[str, int] = field(default_factory=dict)

    @property
    def tool_calls(self) -> list[ToolCallFact]:
        return [step.tool_call for turn in self.turns for step in turn.steps if step.tool_call]

    @property
    def approvals(self) -> list[ApprovalFact]:
        return [step.approval for turn in self.turns for step in turn.steps if step.approval]

    def as_json(self) -> dict[str, Any]:
        """Plain JSON-able data (Django's encoder takes care of datetimes, UUIDs and decimals)."""
        return asdict(self)


def session_export(*, session_id: uuid.UUID) -> SessionExport | None:
    session = AgentSession.objects.filter(pk=session_id).first()
    if session is None:
        return None
    turns = {turn.id: turn for turn in Turn.objects.filter(session_id=session_id)}
    views = session_turn_views(session_id=session_id, limit=TURNS_MAX)
    approval_ids = [item.approval_id for view in views for item in view.items if isinstance(item, ApprovalItem)]
    decisions: dict[str, list[DecisionFact]] = {}
    for row in ApprovalDecision.objects.filter(approval_id__in=approval_ids).order_by("decided_at", "id"):
        decisions.setdefault(row.approval_id, []).append(
            DecisionFact(
                operator=row.operator,
                decision=row.decision,
                outcome=row.get_outcome_display(),
                decided_at=row.decided_at,
                reason=row.reason,
                detail=row.detail,
            )
        )
    facts = []
    for view in views:
        turn = turns[uuid.UUID(view.turn_id)]
        facts.append(
            TurnFact(
                correlation_id=turn.id,
                asked_by=turn.actor,
                question=view.question,
                started_at=turn.started_at,
                finished_at=turn.finished_at,
                status=view.status,
                stop_reason=turn.stop_reason,
                model=turn.model,
                usage=dict(turn.usage or {}),
                tokens_total=turn.tokens_total,
                cost_usd=turn.cost_usd,
                steps=[_step(item, decisions) for item in view.items if _step_of_note(item)],
            )
        )
    usage: dict[str, int] = {}
    for fact in facts:
        for key, value in fact.usage.items():
            usage[key] = usage.get(key, 0) + int(value or 0)
    costs = [fact.cost_usd for fact in facts if fact.cost_usd is not None]
    return SessionExport(
        id=session.id,
        title=session.title or "Untitled session",
        actor=session.actor,
        origin=session.origin,
        created_at=session.created_at,
        last_active_at=session.last_active_at,
        turns=facts,
        tokens_total=sum(fact.tokens_total for fact in facts),
        cost_usd=sum(costs, Decimal(0)) if len(costs) == len(facts) else None,
        usage=usage,
    )


def _step_of_note(item: object) -> bool:
    """Thinking is the model's scratchpad: an incident note records what it said and did."""
    return isinstance(item, TextItem | ToolItem | ApprovalItem | NoticeItem)


def _step(item: object, decisions: dict[str, list[DecisionFact]]) -> StepFact:
    if isinstance(item, TextItem):
        return StepFact(kind="answer", text=item.text)
    if isinstance(item, ToolItem):
        result = item.result[:RESULT_CHARS]
        return StepFact(
            kind="tool_call",
            tool_call=ToolCallFact(
                server=item.server,
                tool=item.tool,
                arguments=item.input,
                state=item.state or ("error" if item.is_error else "ok"),
                duration_ms=item.duration_ms,
                result=result,
                result_complete=not item.truncated and len(item.result) <= RESULT_CHARS,
            ),
        )
    if isinstance(item, ApprovalItem):
        return StepFact(
            kind="approval",
            approval=ApprovalFact(
                approval_id=item.approval_id,
                execution_id=item.execution_id,
                target=item.target,
                action=item.action,
                risk_class=item.risk_class,
                status_requested=item.status,
                message=item.message,
                decisions=decisions.get(item.approval_id, []),
            ),
        )
    assert isinstance(item, NoticeItem)
    return StepFact(kind="notice", text=f"{item.code}: {item.message}")
