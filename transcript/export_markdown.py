"""A session's `SessionExport` as a Markdown incident note: what a person pastes into a ticket.

It leads with what a reader needs first: a header (session, who, when, model, cost), **Summary**
(the escalation's summary, or the final answer's first paragraph), **Outcome** (each execution
asked for, what became of it and who decided), **Escalation** (cause, impact, next step, when there
is one); then the **Timeline** — each question, one line per tool call with a short preview of its
result, long results folded below it (`result_block`), the answers — and the correlation ids.

Every piece that comes from outside Hermes goes through `transcript.export_escape`, so no content
can change the note's structure or carry live HTML (`tests/transcript/test_export_safety.py`).
"""

from __future__ import annotations

import datetime
import json
from decimal import Decimal
from typing import Any

from common.charts import sparkline_for_result
from transcript.export import ActionFact, ApprovalFact, EscalationFact, SessionExport, StepFact, ToolCallFact, TurnFact
from transcript.export_escape import code_span, fenced, folded, inline, quoted

# A tool line previews this much of its result (and of its arguments); a result that fits is shown
# whole there, a longer one is folded below the line.
PREVIEW_CHARS = 120
# A folded result shows at most this much: pretty-printed JSON grows past the stored result.
BLOCK_CHARS = 4000
# The Summary is one paragraph, not the whole answer.
SUMMARY_CHARS = 1200

_DECIDED = {"approve": "approved", "deny": "denied"}
_CALL_STATES = {"ok": "ok", "error": "error", "unknown": "outcome unknown (it may have run)", "started": "in flight"}


def session_markdown(export: SessionExport) -> str:
    """The incident note: header, Summary, Outcome, Escalation, then the Timeline and the ids."""
    lines = [f"# {inline(export.title)}", "", *_header(export), "", "## Summary", "", _summary(export)]
    lines += ["", "## Outcome", "", *_outcome(export)]
    if export.escalation is not None:
        lines += ["", "## Escalation", "", *_escalation(export.escalation)]
    lines += ["", "## Timeline"]
    for number, turn in enumerate(export.turns, start=1):
        lines += ["", *_turn(number, turn)]
    lines += ["", "## Correlation ids", ""]
    lines += [f"{number}. {code_span(str(turn.correlation_id))}" for number, turn in enumerate(export.turns, start=1)]
    return "\n".join(lines) + "\n"


def _header(export: SessionExport) -> list[str]:
    askers = list(dict.fromkeys(turn.asked_by for turn in export.turns if turn.asked_by)) or [export.actor]
    models = list(dict.fromkeys(turn.model for turn in export.turns if turn.model))
    lines = [
        f"- **Session:** {code_span(str(export.id))}, opened by {inline(export.actor)}"
        + (f" via {inline(export.origin)}" if export.origin else ""),
        f"- **Asked by:** {', '.join(inline(asker) for asker in askers)}",
        f"- **When:** {_when(export.created_at)} **to** {_when(export.last_active_at)}",
        f"- **Model:** {', '.join(inline(model) for model in models) if models else '—'}",
        f"- **Cost:** {_cost(export.cost_usd)} · **Tokens:** {_tokens(export.usage, export.tokens_total)}",
        f"- **Turns:** {len(export.turns)} · **Tool calls:** {len(export.tool_calls)}"
        f" · **Actions:** {len(export.actions)} · **Approvals:** {len(export.approvals)}",
    ]
    escalation = export.escalation
    if escalation is not None and escalation.source == "investigation":
        lines.append(
            f"- **Investigation:** opened by Oikos's {inline(escalation.event or 'event')}"
            + (f" on {inline(escalation.entity)}" if escalation.entity else "")
            + (f", {inline(escalation.state)}" if escalation.state else "")
        )
    return lines


def _summary(export: SessionExport) -> str:
    if export.escalation is not None and export.escalation.summary.strip():
        return quoted(_capped(export.escalation.summary, SUMMARY_CHARS))
    paragraph = _first_paragraph(export.final_answer)
    if paragraph:
        return quoted(_capped(paragraph, SUMMARY_CHARS))
    last = export.turns[-1] if export.turns else None
    status = f" (the last turn: {inline(last.status)})" if last is not None else ""
    return f"_Hermes gave no answer{status}._"


def _first_paragraph(answer: str) -> str:
    """The answer's first paragraph of prose: not a heading, not a code block."""
    for paragraph in answer.strip().split("\n\n"):
        text = paragraph.strip()
        if text and not text.startswith(("#", "```", "~~~")):
            return text
    return ""


def _capped(text: str, limit: int) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[:limit].rstrip() + " …"


def _outcome(export: SessionExport) -> list[str]:
    if not export.actions:
        read = len(export.tool_calls)
        calls = f"{read} tool call" + ("" if read == 1 else "s")
        return ["No action was requested" + (f": Hermes only read ({calls})." if read else ".")]
    return [_action_line(action) for action in export.actions]


def _action_line(action: ActionFact) -> str:
    what = f"{inline(action.action or 'an action')} on {inline(action.target or 'an unnamed target')}"
    line = f"- **{inline(action.status.capitalize())}:** {what}, requested by {inline(action.requested_by)}"
    line += f" at {_when(action.requested_at)}"
    if action.decided_by:
        verb = {"denied": "denied", "rejected": "rejected"}.get(action.status, "approved")
        line += f"; {verb} by {inline(action.decided_by)}" + (
            f" at {_when(action.decided_at)}" if action.decided_at else ""
        )
    elif action.status == "awaiting approval":
        line += "; no decision recorded in Hermes"
    ids = [
        f"{label} {code_span(value)}"
        for label, value in (
            ("proposal", action.proposal_id),
            ("approval", action.approval_id),
            ("execution", action.execution_id),
        )
        if value
    ]
    line += f" ({', '.join(ids)})" if ids else ""
    detail = action.detail.strip().rstrip(".")
    line += f" — {inline(detail)}" if detail else ""
    return line + _record_line(action) + "."


def _record_line(action: ActionFact) -> str:
    """What Hermes's record adds: " — verified cleared 40 s after (follow-up turn `…`) · undo offered"."""
    record = action.record
    if record is None or not record.summary:
        return ""
    line = f" — {inline(record.summary)}"
    if record.followup_turn_id:
        line += f" (follow-up turn {code_span(record.followup_turn_id)})"
    if record.verdict_detail:
        line += f": {inline(record.verdict_detail.strip().rstrip('.'))}"
    if record.undo_proposal_id and not record.undone_by:
        line += f" (undo proposal {code_span(record.undo_proposal_id)})"
    return line


def _escalation(escalation: EscalationFact) -> list[str]:
    fields = (escalation.summary, escalation.likely_cause, escalation.impact, escalation.next_step)
    if not any(value.strip() for value in fields):
        # Its turn is running, was cut off before it escalated, or never ran (skipped).
        state = f" (the investigation is {inline(escalation.state)})" if escalation.state else ""
        return [f"_No escalation yet{state}._"]
    lines = [
        f"- **{label}:** {inline(value) if value.strip() else '_not stated_'}"
        for label, value in (
            ("Likely cause", escalation.likely_cause),
            ("Impact", escalation.impact),
            ("Next step", escalation.next_step),
        )
    ]
    source = "the investigation's escalation" if escalation.source == "investigation" else "the answer's Escalation"
    return [*lines, "", f"_From {source}; the Summary above is its summary._"]


def _turn(number: int, turn: TurnFact) -> list[str]:
    lines = [
        f"### {number}. {_when(turn.started_at)} — {inline(turn.asked_by)} asked",
        "",
        quoted(turn.question) if turn.question.strip() else "_(no question text)_",
        "",
        f"Correlation id {code_span(str(turn.correlation_id))} · {inline(turn.status)}"
        + (f" ({inline(turn.stop_reason)})" if turn.stop_reason else "")
        + (f" · model {inline(turn.model)}" if turn.model else "")
        + f" · tokens {_tokens(turn.usage, turn.tokens_total)} · cost {_cost(turn.cost_usd)}",
    ]
    if turn.notes_given:
        lines += ["", f"**Notes given:** {_notes_given(turn)}"]
    last_text = max((index for index, step in enumerate(turn.steps) if step.kind == "answer"), default=-1)
    for index, step in enumerate(turn.steps):
        lines += ["", *_step(step, turn, final=index == last_text)]
    return lines


def _notes_given(turn: TurnFact) -> str:
    """The operators' notes the turn was given, as the answer cites them: [note 12] title (runbook), …"""
    return ", ".join(
        inline(f"[note {int(note['id'])}] {note.get('title') or ''}") + (" (runbook)" if note.get("runbook") else "")
        for note in turn.notes_given
    )


def _step(step: StepFact, turn: TurnFact, *, final: bool) -> list[str]:
    if step.tool_call is not None:
        return _tool_call(step.tool_call)
    if step.approval is not None:
        return [f"**Approval requested:** {_approval_line(step.approval).removeprefix('- ')}"]
    if step.kind == "notice":
        return [f"**Stopped:** {inline(step.text)}"]
    said = f"**Hermes answered** (turn finished {_when(turn.finished_at)}):" if final else "**Hermes said:**"
    return [said, "", quoted(step.text)]


def _tool_call(call: ToolCallFact) -> list[str]:
    """One line — the tool, its arguments, how it went, a preview of its result — then the folds."""
    arguments = _compact(call.arguments)
    line = (
        f"**Tool** {code_span(_tool_name(call))} {code_span(_preview(arguments))}"
        f" — {_CALL_STATES.get(call.state, inline(call.state))}, {call.duration_ms:,} ms"
        f" → {code_span(_preview(_result_compact(call.result)))}"
    )
    lines = [line]
    if len(arguments) > PREVIEW_CHARS:
        pretty = json.dumps(call.arguments, indent=2, ensure_ascii=False, sort_keys=True)
        lines += [
            "",
            folded(f"Arguments of {_tool_name(call)} ({len(arguments):,} characters)", fenced(pretty, "json")),
        ]
    block = result_block(call)
    return lines + (["", *block] if block else [])


def result_block(call: ToolCallFact) -> list[str]:
    """What the note shows of a tool's result below its line: nothing when the line's preview
    holds it whole, else the result folded (pretty JSON or text, at most `BLOCK_CHARS`) with a note
    of what was cut. The one place a result is drawn into the note: a metric series is drawn as a
    text sparkline above it (`common.charts.sparkline_for_result`), whatever the result's length."""
    spark = sparkline_for_result(call.tool, call.result) if call.result_complete else None
    folds = _result_folded(call)
    if spark is None:
        return folds
    return [f"{code_span(spark.bars)} {inline(spark.summary)}", *(["", *folds] if folds else [])]


def _result_folded(call: ToolCallFact) -> list[str]:
    if call.result_complete and len(_result_compact(call.result)) <= PREVIEW_CHARS:
        return []
    text, info = _result_text(call.result)
    cut = len(text) > BLOCK_CHARS
    shown = text[: text.rfind("\n", 0, BLOCK_CHARS) + 1 or BLOCK_CHARS] if cut else text
    notes = []
    if cut:
        notes.append(f"{len(shown):,} of {len(text):,} characters shown")
    if not call.result_complete:
        notes.append(f"the start of a {call.result_chars:,}-character result; the ledger keeps it whole")
    summary = f"Result of {_tool_name(call)} ({call.result_chars or len(call.result):,} characters)"
    body = fenced(shown or "(empty)", info) + (f"\n\n_Cut: {'; '.join(notes)}._" if notes else "")
    return [folded(summary, body)]


def _tool_name(call: ToolCallFact) -> str:
    return f"{call.server}/{call.tool}" if call.server else call.tool


def _compact(value: Any, *, sort_keys: bool = True) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=sort_keys, separators=(", ", ": "))


def _result_compact(result: str) -> str:
    """The result on one line: JSON re-serialised compactly (in the tool's order: the first keys
    are usually the telling ones), any other text with its spaces folded."""
    try:
        return _compact(json.loads(result), sort_keys=False)
    except ValueError:
        return " ".join(result.split()) or "(empty)"


def _result_text(result: str) -> tuple[str, str]:
    """A JSON result pretty-printed (most Oikos tools answer JSON), any other as text."""
    try:
        return json.dumps(json.loads(result), indent=2, ensure_ascii=False), "json"
    except ValueError:
        return result, "text"


def _preview(text: str) -> str:
    return text if len(text) <= PREVIEW_CHARS else text[:PREVIEW_CHARS].rstrip() + "…"


def _when(moment: datetime.datetime | None) -> str:
    if moment is None:
        return "—"
    return moment.astimezone(datetime.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _cost(cost: Decimal | None) -> str:
    return "unknown (no list price for a model used)" if cost is None else f"${cost:.4f}"


def _tokens(usage: dict[str, int], total: int) -> str:
    parts = [
        f"{usage.get(key, 0):,} {label}"
        for key, label in (
            ("input_tokens", "input"),
            ("output_tokens", "output"),
            ("cache_read_input_tokens", "cache read"),
            ("cache_creation_input_tokens", "cache write"),
        )
        if usage.get(key)
    ]
    return f"{total:,}" + (f" ({', '.join(parts)})" if parts else "")


def _approval_line(approval: ApprovalFact) -> str:
    what = (
        f"{inline(approval.action)} on {inline(approval.target)} ({inline(approval.risk_class)}),"
        f" approval {code_span(approval.approval_id)}"
        + (f", execution {code_span(approval.execution_id)}" if approval.execution_id else "")
    )
    if not approval.decisions:
        return f"- {what}: status {inline(approval.status_requested)} when requested; no decision recorded in Hermes."
    decided = "; ".join(
        f"{_DECIDED.get(decision.decision, inline(decision.decision))} by {inline(decision.operator)}"
        f" at {_when(decision.decided_at)}"
        f" — {inline(decision.outcome)}"
        + (f" (reason: {inline(decision.reason)})" if decision.reason else "")
        + (f" ({inline(decision.detail)})" if decision.detail else "")
        for decision in approval.decisions
    )
    return f"- {what}: {decided}."
