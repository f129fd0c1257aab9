"""A session's `SessionExport` as a Markdown incident note that no content can break.

Everything from outside Hermes — questions, answers, tool arguments and results, names, Oikos's
messages — is placed where it cannot change the note's structure:
- questions and answers are block quotes (every line prefixed), so a heading, a rule or an unclosed
  code fence in them ends with the quote; outside code blocks nothing can open HTML, a link or an
  image (`quoted`), so no raw HTML, `javascript:` link or remote image reaches a renderer that
  allows them;
- arguments and results are fenced code blocks whose fence is longer than any backtick run inside;
- short values (titles, names, ids) are inline text with Markdown punctuation backslash-escaped, or
  code spans delimited by more backticks than they contain.
"""

from __future__ import annotations

import datetime
import json
import re
from collections.abc import Iterator
from decimal import Decimal
from urllib.parse import urlsplit

from markdown_it import MarkdownIt
from markdown_it.token import Token

from transcript.export import ApprovalFact, SessionExport, StepFact, ToolCallFact, TurnFact

_PUNCTUATION = re.compile(r"([\\`*_{}\[\]<>&!|#~])")
_BACKTICKS = re.compile(r"`+")


def inline(text: str) -> str:
    """`text` as literal inline Markdown on one line: punctuation escaped, newlines as spaces."""
    return _escaped(_PUNCTUATION, " ".join(str(text).split()))


def _escaped(pattern: re.Pattern[str], text: str) -> str:
    """`text` with what `pattern` matches backslash-escaped, but `<` as `&lt;`.

    cmark-gfm's autolink extension takes a backslash into the URL it links
    (`https://a.example\\<img ...>`), which leaves the `<` after it unescaped; an entity it keeps out.
    """
    return pattern.sub(_escape_one, text)


def _escape_one(match: re.Match[str]) -> str:
    return "&lt;" if match.group() == "<" else "\\" + match.group()


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
    """Model or operator Markdown as a block quote that renders no HTML, no image and no odd link.

    Which lines are code blocks is decided by a CommonMark parser (markdown-it-py), not by
    patterns; they are kept verbatim (a renderer shows them as text). Every other line keeps its
    code spans, found as CommonMark finds them (a backslash escapes a backtick outside code, not
    inside), and has `\\`, the backtick, `[`, `]` and `&` backslash-escaped everywhere else, `<` as
    `&lt;`. So no link, image, autolink or HTML tag can begin outside code, whatever backslashes
    or fence-like lines the text holds; bare http(s) URLs still become links where the renderer links
    them. The result is parsed again, raw HTML allowed: should any HTML, image or link other than
    http(s) remain (a table cell splitting a code span, say), the text is fenced whole instead.
    """
    body = str(text).strip()
    code = _code_lines(body)
    lines = [line if number in code else _prose_line(line) for number, line in enumerate(body.split("\n"))]
    note = "\n".join(f"> {line}" if line.strip() else ">" for line in lines)
    return note if note_safe(note) else fenced(body, "text")


_PROSE = re.compile(r"([\\`\[\]<&])")
# What starts an autolink in cmark-gfm: a scheme's colon, `www.`, an email's `@`.
_AUTOLINK = re.compile(r"[:@]|www\.", re.IGNORECASE)
# Where cmark-gfm ends an autolink: ASCII white space only (not a no-break space).
_SPACE = re.compile(r"[ \t\r\n\f\v]")


def _prose_line(line: str) -> str:
    """`line` with its code spans as they are and everything around them escaped (`_PROSE`)."""
    out: list[str] = []
    start = at = 0
    while at < len(line):
        if line[at] == "\\":
            at += 2  # an escaped character: never opens a code span
            continue
        run = _BACKTICKS.match(line, at)
        if run is None:
            at += 1
            continue
        close = next((m for m in _BACKTICKS.finditer(line, run.end()) if len(m.group()) == len(run.group())), None)
        if close is None or _AUTOLINK.search(_SPACE.split(line[: run.start()])[-1]):
            # No closing run on the line, or a URL right before it that cmark-gfm's autolinks would
            # extend over the opening backticks (they end only at a space or `<`), leaving the span's
            # text to be read as Markdown: literal backticks, escaped with the prose.
            at = run.end()
            continue
        out += [_escaped(_PROSE, line[start:at]), line[at : close.end()]]
        start = at = close.end()
    out.append(_escaped(_PROSE, line[start:]))
    return "".join(out)


_CODE_BLOCKS = ("fence", "code_block")
# As permissive as a note's reader may be: raw HTML passed through, GitHub's tables and strikethrough.
_reader = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])
_parser = MarkdownIt("commonmark", {"html": True})


def _code_lines(text: str) -> set[int]:
    lines: set[int] = set()
    for token in _parser.parse(text):
        if token.type in _CODE_BLOCKS and token.map:
            lines.update(range(*token.map))
    return lines


def note_safe(markdown: str) -> bool:
    """True when `markdown` parses to no raw HTML, no image and only http(s) links."""
    return all(_token_safe(token) for token in _tokens_nested(_reader.parse(markdown)))


def _tokens_nested(tokens: list[Token]) -> Iterator[Token]:
    for token in tokens:
        yield token
        if token.children:
            yield from _tokens_nested(token.children)


def _token_safe(token: Token) -> bool:
    if token.type in ("html_block", "html_inline", "image"):
        return False
    if token.type == "link_open":
        return urlsplit(str(token.attrGet("href") or "")).scheme.lower() in ("http", "https")
    return True


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
