"""A session as an incident note's facts: what was asked, what Hermes did and said, who decided.

`session_export` reads the session once into plain data (`SessionExport`), which `as_json` hands to
tools and `transcript.export_markdown` writes as a Markdown note. It reads the transcript as the
control room shows it (`selectors.session_turn_views`: thinking left out, tool results as the model
saw them), adds the ledger's timings and the approval decisions Hermes recorded, and bounds each
tool result (`RESULT_CHARS`): the ledger keeps them whole.

The note leads with what came of the session, so the facts carry it too: `actions`, each execution
the session asked Oikos for (or proposed in Hermes) with what became of it and who decided, and
`escalation`, which the caller fills in (`with_escalation`) — an investigation's escalation lives
in `watch`, a layer above this one.
"""

from __future__ import annotations

import datetime
import json
import uuid
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from decimal import Decimal
from typing import Any

from agent.engine.approvals import REQUEST_EXECUTION
from agent.models import AgentSession, Proposal, Turn
from agent.tools.config import oikos_server_name
from oikos.change_view import ChangeView, change_views
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
    # The length of the result as the model saw it, of which `result` is the start.
    result_chars: int = 0


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
class RecordFact:
    """Hermes's record of an execution (`oikos.change_view`): how it ended, what its follow-up found,
    and the way back."""

    status: str
    # pending | claimed (checking) | done | skipped (`followup_note` says why)
    followup: str
    followup_note: str
    # The follow-up turn, in the same session; "" until it started.
    followup_turn_id: str
    # cleared | not_cleared | failed; "" until the follow-up ends.
    verdict: str
    verdict_detail: str
    # From the end of the execution to the verdict.
    verified_after_seconds: int | None
    # The rollback proposal offered, and the execution that undid this one.
    undo_proposal_id: str
    undone_by: str
    # The line the note writes ("verified cleared 40 s after · undo offered").
    summary: str

    @classmethod
    def of(cls, record: ChangeView) -> RecordFact:
        return cls(
            status=record.status,
            followup=record.followup,
            followup_note=record.followup_note,
            followup_turn_id=record.followup_turn_id,
            verdict=record.verdict,
            verdict_detail=record.verdict_detail,
            verified_after_seconds=record.seconds_after,
            undo_proposal_id=record.undo_proposal_id,
            undone_by=record.undone_by,
            summary=record.summary(),
        )


@dataclass(frozen=True)
class ActionFact:
    """An execution the session asked Oikos for (or proposed in Hermes), and what became of it."""

    action: str
    target: str
    # The turn's asker: the model requested it on their behalf.
    requested_by: str
    requested_at: datetime.datetime
    # requested | awaiting approval | approved | denied | completed | failed | running | proposed |
    # rejected (a proposal an operator turned down) — Oikos's own word when it is another.
    status: str
    decided_by: str = ""
    decided_at: datetime.datetime | None = None
    # What Oikos or Hermes said about it (the request's message, an error, a decision's detail).
    detail: str = ""
    approval_id: str = ""
    execution_id: str = ""
    proposal_id: str = ""
    correlation_id: uuid.UUID | None = None
    # Hermes's record of the execution, when it has one.
    record: RecordFact | None = None


@dataclass(frozen=True)
class EscalationFact:
    """Cause, impact and next step: an investigation's stored escalation, or an answer's section."""

    source: str  # investigation | answer
    summary: str
    impact: str
    likely_cause: str
    next_step: str
    # For an investigation: the entity, the event that opened it, and its state (open, resolved, ...).
    entity: str = ""
    event: str = ""
    state: str = ""


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
    # The operators' notes the turn was given (`Turn.notes_given`): [{"id", "title", "runbook"}].
    notes_given: list[dict[str, Any]] = field(default_factory=list)


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
    # Every execution requested or proposed, in the order asked (`ActionFact`).
    actions: list[ActionFact] = field(default_factory=list)
    # None until the caller adds one (`with_escalation`), and for a session without one.
    escalation: EscalationFact | None = None

    @property
    def final_answer(self) -> str:
        """What Hermes said last: the last text of the latest turn that said something."""
        for turn in reversed(self.turns):
            texts = [step.text for step in turn.steps if step.kind == "answer" and step.text.strip()]
            if texts:
                return texts[-1]
        return ""

    def with_escalation(self, escalation: EscalationFact | None) -> SessionExport:
        return replace(self, escalation=escalation)

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
                notes_given=list(view.notes_given),
            )
        )
    # Proposed in Hermes instead of sent (`agent.proposals`): the tool's answer is prose, the row the fact.
    proposed = {row.tool_use_id: row for row in Proposal.objects.filter(session_id=session_id) if row.tool_use_id}
    actions = [
        action for view in views for action in _actions(view.items, turns[uuid.UUID(view.turn_id)], decisions, proposed)
    ]
    actions = _actions_recorded(actions)
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
        actions=actions,
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
                result_chars=len(item.result),
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


_DECIDED = {"approve": "approved", "deny": "denied"}


def _actions(
    items: Sequence[object], turn: Turn, decisions: dict[str, list[DecisionFact]], proposed: dict[str, Proposal]
) -> list[ActionFact]:
    """The turn's `request_execution` calls, each with the latest word on it in the turn's ledger.

    A parked request is decided from the control room (`decisions`), a proposal in Hermes
    (`proposed`); a later `get_execution` of the same execution in the turn says how it ended.
    Anything Oikos said elsewhere is not known here.
    """
    actions: list[ActionFact] = []
    oikos = oikos_server_name()
    for item in items:
        # Only Oikos's tools count: any MCP server may name a tool `request_execution`.
        if not isinstance(item, ToolItem) or not item.done or item.server != oikos:
            continue
        said = _json_object(item.result)
        if item.tool == REQUEST_EXECUTION and item.tool_use_id in proposed:
            actions.append(_action_proposed(item, proposed[item.tool_use_id], turn))
        elif item.tool == REQUEST_EXECUTION:
            actions.append(_action_requested(item, said, turn, decisions))
        elif item.tool == "get_execution" and said.get("execution_id"):
            actions = [_action_followed(action, said) for action in actions]
    return actions


def _action_requested(
    item: ToolItem, said: dict[str, Any], turn: Turn, decisions: dict[str, list[DecisionFact]]
) -> ActionFact:
    action = ActionFact(
        action=str(said.get("action") or item.input.get("action") or ""),
        target=str(said.get("target") or item.input.get("target") or ""),
        requested_by=turn.actor,
        requested_at=turn.started_at,
        status=str(said.get("status") or "requested"),
        detail=str(said.get("message") or ""),
        approval_id=str(said.get("approval_id") or ""),
        execution_id=str(said.get("execution_id") or ""),
        correlation_id=turn.id,
    )
    if item.is_error or item.state == "error":
        return replace(action, status="failed", detail=" ".join(item.result.split())[:300])
    if said.get("needs_approval") or action.status == "proposed":
        action = replace(action, status="awaiting approval")
        decided = [d for d in decisions.get(action.approval_id, []) if d.outcome == "Decided"]
        if decided:
            last = decided[-1]
            return replace(
                action,
                status=_DECIDED.get(last.decision, last.decision),
                decided_by=last.operator,
                decided_at=last.decided_at,
                # What Oikos said when it parked the request is stale once decided.
                detail=last.reason,
            )
    return action


def _actions_recorded(actions: list[ActionFact]) -> list[ActionFact]:
    """The actions with Hermes's record of their executions: how each ended (the record hears
    Oikos's events after the turn is over), its follow-up's verdict and its undo."""
    records = change_views(action.execution_id for action in actions)
    recorded: list[ActionFact] = []
    for action in actions:
        record = records.get(action.execution_id)
        if record is None:
            recorded.append(action)
            continue
        status = record.status if record.finished else action.status
        recorded.append(replace(action, status=status, record=RecordFact.of(record)))
    return recorded


def _action_followed(action: ActionFact, said: dict[str, Any]) -> ActionFact:
    """`action` with the status a later `get_execution` of its execution reported."""
    if action.execution_id != str(said["execution_id"]) or not said.get("status"):
        return action
    decided_by = str(said.get("decided_by") or "") or action.decided_by
    return replace(action, status=str(said["status"]), decided_by=decided_by)


def _action_proposed(item: ToolItem, row: Proposal, turn: Turn) -> ActionFact:
    """A proposal with the decision an operator took on it in Hermes, and what Oikos then answered."""
    action = ActionFact(
        action=row.action or str(item.input.get("action") or ""),
        target=row.target or str(item.input.get("target") or ""),
        requested_by=turn.actor,
        requested_at=turn.started_at,
        status="proposed",
        proposal_id=str(row.id),
        correlation_id=turn.id,
    )
    if row.status == Proposal.Status.PENDING:
        return action
    decided = replace(action, decided_by=row.decided_by, decided_at=row.decided_at)
    if row.status == Proposal.Status.REJECTED:
        return replace(decided, status="rejected")
    outcome = row.outcome if isinstance(row.outcome, dict) else {}
    if outcome.get("error"):
        return replace(decided, status="failed", detail=str(outcome["error"]))
    return replace(
        decided,
        status=str(outcome.get("status") or "approved"),
        execution_id=str(outcome.get("execution_id") or ""),
        approval_id=str(outcome.get("approval_id") or ""),
    )


def _json_object(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}
