"""What the bridge posts: answers, tool lines and approval cards, as Matrix message contents.

Every message has a plain `body` (what phones' notifications and plain clients show), which starts
with what matters, and, when final, an HTML `formatted_body`. Model text reaches HTML only through
the control room's renderer (`common.markdown`: Markdown without raw HTML, then sanitised);
everything else is escaped by `format_html`. A streaming answer is sent as plain text only: HTML is
rendered once, at the end.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.utils.html import format_html, format_html_join

from common.markdown import markdown_render

HTML = "org.matrix.custom.html"
STREAMING_MARK = " …"
CARD_ICONS = {
    "pending": "⏳",
    "approved": "✅",
    "denied": "❌",
    "running": "⚙️",
    "completed": "✅",
    "failed": "⚠️",
}


@dataclass
class ToolLine:
    server: str
    tool: str
    duration_ms: int | None = None
    # "ok", "failed", "unknown" (cut off: it may have run), or "" while running.
    state: str = ""

    def text(self) -> str:
        parts = [self.server or "tool", self.tool]
        if self.duration_ms is not None:
            parts.append(f"{self.duration_ms} ms")
        parts.append({"": "running", "unknown": "outcome unknown"}.get(self.state, self.state))
        return " · ".join(parts)


def answer_content(*, text: str, tools: list[ToolLine], note: str = "", final: bool) -> dict[str, Any]:
    """The answer message: the answer first (all a phone's notification shows), then a note (stopped,
    an error), then the tool calls as compact lines.

    While the turn runs it is an `m.notice` (plain text, edited as it streams): stock push rules
    never notify for notices, nor for edits. The final answer is a new `m.text` event, the one that
    notifies (matrix/answer.py).
    """
    lines = "\n".join(f"▸ {tool.text()}" for tool in tools)
    answer = text.strip()
    if not final:
        answer = (answer + STREAMING_MARK) if answer else "…"
    plain = "\n\n".join(part for part in (answer, note, lines) if part)
    if not final:
        return {"msgtype": "m.notice", "body": plain}
    tool_html = (
        format_html("<ul>{}</ul>", format_html_join("", "<li><code>{}</code></li>", ((t.text(),) for t in tools)))
        if tools
        else ""
    )
    note_html = format_html("<p><em>{}</em></p>", note) if note else ""
    return {
        "msgtype": "m.text",
        "body": plain,
        "format": HTML,
        "formatted_body": f"{markdown_render(answer)}{note_html}{tool_html}",
    }


ANSWERED_BELOW = "↓ Answered below."


def answered_below_content() -> dict[str, Any]:
    """What the progress message becomes once the final answer is posted after it: a pointer to it."""
    return {"msgtype": "m.notice", "body": ANSWERED_BELOW}


def card_content(
    *, request: dict[str, Any], approval_id: str, status: str, decided_by: str, via: str, detail: str
) -> dict[str, Any]:
    """An approval card: what is asked, its risk and reason, and where it stands."""
    action, target = str(request.get("action", "")), str(request.get("target", ""))
    risk, reason = str(request.get("risk_class", "")), str(request.get("reason", "") or "(none given)")
    state = _card_state(status, decided_by, via, detail)
    plain = (
        f"{CARD_ICONS.get(status, '•')} Approval needed: {action} {target}\n"
        f"risk: {risk} · approval {approval_id}\n"
        f"reason: {reason}\n{state}"
    )
    html = format_html(
        "<p><strong>{} Approval needed: {} {}</strong><br>risk: <code>{}</code> · approval <code>{}</code><br>"
        "reason: {}</p><p>{}</p>",
        CARD_ICONS.get(status, "•"),
        action,
        target,
        risk,
        approval_id,
        reason,
        state,
    )
    # `m.text`, not a notice: it asks for a decision, so it notifies and is not shown muted.
    return {"msgtype": "m.text", "body": plain, "format": HTML, "formatted_body": str(html)}


def _card_state(status: str, decided_by: str, via: str, detail: str) -> str:
    if status == "pending":
        return "Tap ✅ to approve or ❌ to deny (operators only), or reply “approve” / “deny”."
    by = f" by {decided_by}" if decided_by else ""
    where = " in the control room (or another client)" if via == "elsewhere" else ""
    states = {
        "approved": f"Approved{by}{where} — waiting to run.",
        "denied": f"Denied{by}{where}.",
        "running": f"Approved{by}{where} — running…",
        "completed": f"Approved{by}{where} — completed.",
        "failed": f"Approved{by}{where} — failed.",
    }
    line = states.get(status, f"{status}{by}{where}.")
    return f"{line} {detail}".strip()


def edit_content(event_id: str, content: dict[str, Any]) -> dict[str, Any]:
    """An edit (`m.replace`) of `event_id` to `content`; the fallback body is marked `* ` as clients expect."""
    fallback = {key: value for key, value in content.items()}
    fallback["body"] = f"* {content['body']}"
    if "formatted_body" in content:
        fallback["formatted_body"] = f"* {content['formatted_body']}"
    return {**fallback, "m.new_content": content, "m.relates_to": {"rel_type": "m.replace", "event_id": event_id}}


def in_thread(content: dict[str, Any], *, root_event_id: str, reply_to: str, mention: str = "") -> dict[str, Any]:
    """`content` as a message of the thread rooted at `root_event_id` (replying to `reply_to` for old clients).

    `mention`: a user the message is for (an intentional mention, `m.mentions`, which stock push
    rules notify loudly even in a room set to mentions only).
    """
    threaded = {
        **content,
        "m.relates_to": {
            "rel_type": "m.thread",
            "event_id": root_event_id,
            "is_falling_back": True,
            "m.in_reply_to": {"event_id": reply_to},
        },
    }
    if mention:
        threaded["m.mentions"] = {"user_ids": [mention]}
    return threaded


def reaction_content(event_id: str, key: str) -> dict[str, Any]:
    """A reaction (`m.annotation`) with `key` on `event_id`."""
    return {"m.relates_to": {"rel_type": "m.annotation", "event_id": event_id, "key": key}}


ESCALATION_FIELDS = (
    ("summary", "Summary"),
    ("impact", "Impact"),
    ("likely_cause", "Likely cause"),
    ("next_step", "Next step"),
)
ESCALATION_FOOTER = "Reply in this thread to continue the investigation."


def escalation_content(*, title: str, escalation: dict[str, Any]) -> dict[str, Any]:
    """An investigation's escalation, the root of its thread. Model-written, so escaped, never rendered."""
    rows = [(label, str(escalation.get(key) or "")) for key, label in ESCALATION_FIELDS if escalation.get(key)]
    approvals = [
        f"{a.get('approval_id')} ({a.get('action')} {a.get('target')})"
        for a in escalation.get("approvals") or []
        if isinstance(a, dict)
    ]
    if approvals:
        rows.append(("Waiting for approval", ", ".join(approvals)))
    heading = f"🔎 Hermes investigated: {title}"
    plain = "\n".join([heading, *(f"{label}: {text}" for label, text in rows), ESCALATION_FOOTER])
    html = format_html(
        "<p><strong>{}</strong></p><ul>{}</ul><p><em>{}</em></p>",
        heading,
        format_html_join("", "<li><strong>{}:</strong> {}</li>", rows),
        ESCALATION_FOOTER,
    )
    return {"msgtype": "m.text", "body": plain, "format": HTML, "formatted_body": str(html)}


# How a follow-up's message begins: the verdict, all a phone's notification may show.
VERDICT_HEADS = {"cleared": "✅ Verified: cleared", "not_cleared": "⚠️ Not cleared", "failed": "❌ Failed"}


def followup_content(
    *, action: str, target: str, verdict: str, detail: str, error: str, answer: str, undo: str, asked: str
) -> dict[str, Any]:
    """The verdict of an execution's follow-up, as a new message in the thread that asked for it.

    The body leads with the verdict and what was checked; then the follow-up turn's answer (model
    text: rendered like an answer, never trusted as HTML), the way back when one waits for approval,
    and who it is for.
    """
    head = f"{VERDICT_HEADS.get(verdict, verdict)} — {action} {target}".strip()
    lead = f"{head}: {detail}" if detail else head
    failure = f"Oikos said: {error}" if error and verdict == "failed" else ""
    way_back = (
        f"↩️ The way back is offered: {undo}. It waits for an operator's approval in the control room (Approvals)."
        if undo
        else ""
    )
    plain = "\n\n".join(part for part in (lead, failure, answer.strip(), way_back, asked) if part)
    html = format_html("<p><strong>{}</strong>{}</p>", head, f": {detail}" if detail else "")
    if failure:
        html += format_html("<p>{}</p>", failure)
    body_html = markdown_render(answer.strip()) if answer.strip() else ""
    tail = format_html("<p>{}</p>", way_back) if way_back else ""
    if asked:
        tail += format_html("<p><em>{}</em></p>", asked)
    return {"msgtype": "m.text", "body": plain, "format": HTML, "formatted_body": f"{html}{body_html}{tail}"}


SCHEDULE_NOT_RUN = {
    "budget": "did not run: the daily token budget is spent (it runs again at its next time)",
}


def schedule_run_content(
    *, name: str, state: str, skipped_reason: str, when: str, verdict: str, answer: str, link: str
) -> dict[str, Any]:
    """One scheduled run as one message of its room.

    A run that answered leads with its verdict, in bold (all a phone's notification may show), then
    the rest of the answer (model text: rendered like an answer, never trusted as HTML), then which
    schedule and when, with a link to its session when the bridge knows the control room's address.
    A run that failed, or was skipped for the budget, is one short line saying so.
    """
    footer = f"{name} · {when}"
    if state != "done":
        what = "did not finish: the run failed" if state == "failed" else SCHEDULE_NOT_RUN.get(skipped_reason, "")
        icon = "⚠️" if state == "failed" else "⏭️"
        line = f"{icon} {name} ({when}) {what or 'did not run'}."
        html = format_html("<p>{}{}</p>", line, _session_link(link))
        return {"msgtype": "m.text", "body": f"{line} {link}".strip(), "format": HTML, "formatted_body": str(html)}
    head = verdict.strip() or f"{name}: the answer has no verdict line"
    rest = _answer_after(answer, verdict)
    plain = "\n\n".join(part for part in (head, rest, f"— {footer}", link) if part)
    html = format_html("<p><strong>{}</strong></p>", head)
    body_html = markdown_render(rest) if rest else ""
    tail = format_html("<p><em>{}</em>{}</p>", footer, _session_link(link))
    return {"msgtype": "m.text", "body": plain, "format": HTML, "formatted_body": f"{html}{body_html}{tail}"}


def _session_link(link: str) -> str:
    return format_html(' · <a href="{}">Open in the control room</a>', link) if link else ""


def _answer_after(answer: str, verdict: str) -> str:
    """The answer without its first line when that line is the verdict (said once, in bold, above)."""
    text = answer.strip()
    first, _, rest = text.partition("\n")
    if verdict.strip() and first.strip(" *_#>").strip() == verdict.strip(" *_#>").strip():
        return rest.strip()
    return text
