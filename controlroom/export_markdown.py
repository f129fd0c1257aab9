"""A session's `SessionExport` as a Markdown incident note that no content can break.

Everything from outside Hermes — questions, answers, tool arguments and results, names, Oikos's
messages — is placed where it cannot change the note's structure:
- questions and answers are block quotes (every line prefixed), so a heading, a rule or an unclosed
  code fence in them ends with the quote; `<` outside code becomes `&lt;`, so no raw HTML reaches a
  renderer that allows it;
- arguments and results are fenced code blocks whose fence is longer than any backtick run inside;
- short values (titles, names, ids) are inline text with Markdown punctuation backslash-escaped, or
  code spans delimited by more backticks than they contain.
"""

from __future__ import annotations

import datetime
import json
import re
from decimal import Decimal

from controlroom.export import ApprovalFact, SessionExport, StepFact, ToolCallFact, TurnFact

_PUNCTUATION = re.compile(r"([\\`*_{}\[\]<>&!|#~])")
_BACKTICKS = re.compile(r"`+")
_FENCE_LINE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_CODE_SPAN = re.compile(r"(`+)(.+?)(?<!`)\1(?!`)")


def inline(text: str) -> str:
    """`text` as literal inline Markdown on one line: punctuation escaped, newlines as spaces."""
    return _PUNCTUATION.sub(r"\\\1", " ".join(str(text).split()))


def code_span(text: str) -> str:
    """`text` as an inline code span, delimited by one more backtick than its longest run."""
    text = " ".join(str(text).split())
    longest = max((len(run) for run in _BACKTICKS.findall(text)), default=0)
    fence = "`" * (longest + 1)
    padded = f" {text} " if text.startswith("`") or text.endswith("`") or not text.strip() else text
    return f"{fence}{padded}{fence}"


def fenced(text: str, info: str = "") -> str:
    """A fenced code block holding `text` verbatim: its fence outruns any backtick run inside."""
    longest = max((len(run) for run in _BACKTICKS.findall(text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{info}\n{text.rstrip()}\n{fence}"


def quoted(text: str) -> str:
    """Model or operator Markdown as a block quote, with raw HTML outside code neutralised."""
    lines = _html_neutralised(str(text).strip()).split("\n") or [""]
    return "\n".join(f"> {line}" if line.strip() else ">" for line in lines)


def _html_neutralised(text: str) -> str:
    out: list[str] = []
    fence: str | None = None
    for line in text.split("\n"):
        marker = _FENCE_LINE.match(line)
        if fence is not None:
            out.append(line)
            if marker and marker.group(1)[0] == fence[0] and len(marker.group(1)) >= len(fence):
                fence = None
            continue
        if marker:
            fence = marker.group(1)
            out.append(line)
            continue
        # Outside code spans only: `<` in code is shown as it is, never parsed as HTML.
        pieces, last = [], 0
        for span in _CODE_SPAN.finditer(line):
            pieces.append(line[last : span.start()].replace("<", "&lt;"))
            pieces.append(span.group(0))
            last = span.end()
        pieces.append(line[last:].replace("<", "&lt;"))
        out.append("".join(pieces))
    return "\n".join(out)


_DECIDED = {"approve": "approved", "deny": "denied"}


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


def session_markdown(export: SessionExport) -> str:
    """The incident note: a summary, then each turn's question, tool calls, approvals and answer."""
    lines = [
        f"# {inline(export.title)}",
        "",
        f"- **Session:** {code_span(str(export.id))}",
        f"- **Opened by:** {inline(export.actor)}" + (f" via {inline(export.origin)}" if export.origin else ""),
        f"- **From:** {_when(export.created_at)} **to** {_when(export.last_active_at)}",
        f"- **Turns:** {len(export.turns)} · **Tool calls:** {len(export.tool_calls)}"
        f" · **Approvals:** {len(export.approvals)}",
        f"- **Tokens:** {_tokens(export.usage, export.tokens_total)}",
        f"- **Cost:** {_cost(export.cost_usd)}",
        "",
        "## Timeline",
    ]
    for number, turn in enumerate(export.turns, start=1):
        lines += ["", *_turn(number, turn)]
    if export.approvals:
        lines += ["", "## Approvals", ""]
        lines += [_approval_line(approval) for approval in export.approvals]
    lines += ["", "## Correlation ids", ""]
    lines += [f"{number}. {code_span(str(turn.correlation_id))}" for number, turn in enumerate(export.turns, start=1)]
    return "\n".join(lines) + "\n"


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
    last_text = max((index for index, step in enumerate(turn.steps) if step.kind == "answer"), default=-1)
    for index, step in enumerate(turn.steps):
        lines += ["", *_step(step, turn, final=index == last_text)]
    return lines


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
    outcome = {"ok": "ok", "error": "error", "unknown": "outcome unknown (it may have run)", "started": "in flight"}
    lines = [
        f"**Tool call** {code_span(f'{call.server}/{call.tool}' if call.server else call.tool)}"
        f" — {outcome.get(call.state, inline(call.state))}, {call.duration_ms:,} ms",
        "",
        "Arguments:",
        "",
        fenced(json.dumps(call.arguments, indent=2, ensure_ascii=False, sort_keys=True), "json"),
        "",
        "Result" + ("" if call.result_complete else " (the start; the ledger keeps the whole result)") + ":",
        "",
        _result_block(call.result),
    ]
    return lines


def _result_block(result: str) -> str:
    """A JSON result pretty-printed (most Oikos tools answer JSON), any other as text."""
    try:
        return fenced(json.dumps(json.loads(result), indent=2, ensure_ascii=False), "json")
    except ValueError:
        return fenced(result or "(empty)", "text")


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
