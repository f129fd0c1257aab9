"""A scripted model for the control room: one responder that answers whatever the operator asks.

`OperatorModel` reads the latest question of each request and hands the conversation to the
scripted behaviour that fits it, one instance per turn (so a browser test can ask several
questions of one model running behind a Daphne subprocess):

- "…degraded…"            → `DegradedInvestigator` (health summary, blast radius, a Markdown answer)
- "restart <name>"        → `request_execution(service:<name>, restart)`, auto-acted by Oikos
- "deploy <name>"         → `request_execution(service:<name>, deploy)`, parked for approval
- "…long…"                → a long answer streamed slowly (for Stop and reload tests)
- "…hostile…"             → answers and tool arguments carrying script, event-handler, javascript:
                            and htmx payloads (for the escaping tests)
- "…chart…"               → `query_metrics(service:postgres, disk_pct)`, then a short answer
- "remember that …"       → `remember` (a note on the services it names), then says it is proposed
- "…sonarr…"              → answers citing the operators' notes its request was given (`[note N]`)
- "…think…"               → thinks (streamed slowly), checks the health summary, thinks again
                            and answers (needs thinking enabled, Hermes's default)
- anything else           → a short echo
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tests.fakes.anthropic_script import Reply, text, thinking, tool_use
from tests.fakes.scripted_models import (
    DegradedInvestigator,
    ExecutionRequester,
    last_tool_results,
    offered_tool,
    system_text,
)

HOSTILE_TEXT = (
    "Careful: <script>window.__pwned = 'script'</script> and "
    '<img src="/ui/pwned-img" onerror="window.__pwned = \'img\'"> and '
    "[a link](javascript:window.__pwned='link') and "
    '<button hx-get="/ui/pwned-htmx" hx-trigger="load">htmx</button> and '
    '<div hx-swap-oob="innerHTML:#rail">owned</div>. **Bold still works.**'
)
# Tool arguments the chip shows; Oikos echoes the unknown slug back in its error.
HOSTILE_SLUG = "<img src=/ui/pwned-chip onerror=\"window.__pwned='chip'\">"
HOSTILE_TOOL_ID = 'toolu_x" onmouseover="window.__pwned=1'
# About 3,000 characters streamed over about 2.5 s: long enough to reload, close or stop mid-answer.
LONG_ANSWER = " ".join(f"Line {n}: checking the fleet, one service at a time." for n in range(1, 61))
# Ten times longer (about 25 s): questions that will be stopped get it, so that Stop lands mid-answer
# however slow the machine is.
STOPPABLE_ANSWER = " ".join(f"Line {n}: checking the fleet, one service at a time." for n in range(1, 601))


def latest_question(request: dict[str, Any]) -> str:
    """The operator's newest question: the last user text that is not a Hermes note."""
    for message in reversed(request.get("messages", [])):
        if message.get("role") != "user":
            continue
        content = message.get("content")
        texts = (
            [content] if isinstance(content, str) else [b.get("text", "") for b in content if b.get("type") == "text"]
        )
        for said in texts:
            if said and not said.startswith("[Hermes:"):
                return str(said)
    return ""


@dataclass
class Hostile:
    def __call__(self, request: dict[str, Any]) -> Reply:
        if not last_tool_results(request) and request.get("tools"):
            return Reply.tool_use(offered_tool(request, "get_entity"), {"slug": HOSTILE_SLUG}, id=HOSTILE_TOOL_ID)
        return Reply.text(HOSTILE_TEXT, chunk=20)


@dataclass
class LongAnswer:
    delay: float = 0.02
    chunk: int = 24
    text: str = LONG_ANSWER

    def __call__(self, request: dict[str, Any]) -> Reply:
        return Reply.text(self.text, chunk=self.chunk, delay=self.delay)


THINKING_FIRST = "The operator wants <b>a careful answer</b>. The health summary shows what is degraded; start there."
THINKING_SECOND = "The summary names postgres as degraded. That answers it; no need for more calls."
THINKER_ANSWER = "After thinking it through: **postgres** is degraded."


@dataclass
class Thinker:
    delay: float = 0.03

    def __call__(self, request: dict[str, Any]) -> Reply:
        if not last_tool_results(request) and request.get("tools"):
            health = tool_use(offered_tool(request, "get_health_summary"), {})
            return Reply.blocks([thinking(THINKING_FIRST), health], chunk=6, delay=self.delay)
        return Reply.blocks([thinking(THINKING_SECOND), text(THINKER_ANSWER)], chunk=6, delay=self.delay)


# What the "…chart…" behaviour asks Oikos for (drawn as a chart in its chip).
CHART_QUERY = {"slug": "service:postgres", "metric": "disk_pct", "since_minutes": 120}


@dataclass
class MetricReader:
    def __call__(self, request: dict[str, Any]) -> Reply:
        if not last_tool_results(request) and request.get("tools"):
            return Reply.tool_use(offered_tool(request, "query_metrics"), dict(CHART_QUERY))
        return Reply.text("postgres's disk has been climbing for the last two hours.", chunk=20)


# What "remember that …" says once the note is proposed: never that it is saved.
REMEMBER_ANSWER = "I proposed that as a note. Nothing is saved until you press Save on its card."
SERVICES_KNOWN = ("jellyfin", "sonarr", "caddy", "postgres", "nextcloud", "collabora")


@dataclass
class Rememberer:
    """Proposes the operator's "remember that …" as a note on the services it names."""

    def __call__(self, request: dict[str, Any]) -> Reply:
        if not last_tool_results(request):
            said = re.sub(r"^\s*remember that\s+", "", latest_question(request), flags=re.IGNORECASE).strip()
            named = [f"service:{name}" for name in SERVICES_KNOWN if name in said.lower()]
            note = {"text": said[:1].upper() + said[1:], "entities": named, "tags": ["storage"]}
            return Reply.tool_use(offered_tool(request, "remember"), note)
        return Reply.text(REMEMBER_ANSWER, chunk=20)


@dataclass
class NoteCiter:
    """Answers from the operators' notes in its request, citing each one it was given."""

    def __call__(self, request: dict[str, Any]) -> Reply:
        cited = list(dict.fromkeys(re.findall(r"\[note (\d+)\]", system_text(request))))
        if not cited:
            return Reply.text("I have no note about that.", chunk=20)
        notes = ", ".join(f"[note {number}]" for number in cited)
        return Reply.text(f"Going by {notes}: restart sonarr, not prowlarr.", chunk=20)


@dataclass
class Echo:
    def __call__(self, request: dict[str, Any]) -> Reply:
        return Reply.text(f"You said: {latest_question(request)}", chunk=10)


def _behaviour_for(question: str, *, delay: float) -> Callable[[dict[str, Any]], Reply]:
    lowered = question.lower()
    # An investigation's brief (watch/investigate.py): the health → blast-radius chain.
    if "degraded" in lowered or "investigation hermes opened" in lowered:
        return DegradedInvestigator(chunk=6, delay=delay)
    action = re.search(r"\b(restart|deploy)\s+([a-z0-9-]+)", lowered)
    if action:
        return ExecutionRequester(target=f"service:{action.group(2)}", action=action.group(1), delay=delay)
    if "long" in lowered and "stop" in lowered:
        return LongAnswer(text=STOPPABLE_ANSWER)
    if "long" in lowered:
        return LongAnswer()
    if "hostile" in lowered:
        return Hostile()
    if "think" in lowered:
        return Thinker()
    if "chart" in lowered:
        return MetricReader()
    if lowered.startswith("remember that"):
        return Rememberer()
    if "sonarr" in lowered:
        return NoteCiter()
    return Echo()


@dataclass
class OperatorModel:
    """Dispatches each request to the behaviour of its question; thread-safe (the fake's thread).

    A request without tool results starts a turn and gets a fresh behaviour; the requests that
    follow in that turn (carrying tool results) go to the same one.
    """

    delay: float = 0.01
    _turns: dict[str, Callable[[dict[str, Any]], Reply]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, request: dict[str, Any]) -> Reply:
        question = latest_question(request)
        with self._lock:
            behaviour = self._turns.get(question)
            if behaviour is None or not last_tool_results(request):
                behaviour = self._turns[question] = _behaviour_for(question, delay=self.delay)
        return behaviour(request)
