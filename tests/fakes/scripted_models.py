"""Scripted models: responders for `FakeAnthropic` that read the request like a model would.

`DegradedInvestigator` answers "what's degraded and what depends on it?" the way a good model
does: health summary first, then the blast radius of whatever the summary says is degraded, then a
Markdown answer built from what the tools returned. It works against the mini Oikos test server
and against `oikos_sim`, because it reads the tool results instead of assuming them.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from tests.fakes.anthropic_script import Reply

UNHEALTHY = {"degraded", "down", "failing", "critical"}


def offered_tool(request: dict[str, Any], suffix: str) -> str:
    """The model-facing name of the offered tool whose name ends with `__<suffix>`."""
    for tool in request.get("tools", []):
        if tool["name"] == suffix or tool["name"].endswith(f"__{suffix}"):
            return tool["name"]
    raise AssertionError(f"no tool named like {suffix!r} was offered to the model")


def last_tool_results(request: dict[str, Any]) -> list[dict[str, Any]]:
    last = request["messages"][-1]
    if last["role"] != "user":
        return []
    return [block for block in last["content"] if block.get("type") == "tool_result"]


def tool_result_text(result: dict[str, Any]) -> str:
    content = result.get("content", "")
    if isinstance(content, str):
        return content
    return "".join(block.get("text", "") for block in content if block.get("type") == "text")


def _json_objects(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def _walk(value: Any) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    if isinstance(value, dict):
        found.append(value)
        for item in value.values():
            found.extend(_walk(item))
    elif isinstance(value, list):
        for item in value:
            found.extend(_walk(item))
    return found


def degraded_slug(text: str) -> str | None:
    """The first entity the health summary reports as unhealthy."""
    for item in _walk(_json_objects(text)):
        if isinstance(item.get("slug"), str) and str(item.get("health", "")).lower() in UNHEALTHY:
            return item["slug"]
    return None


def dependants(text: str) -> list[tuple[str, int]]:
    return [
        (item["slug"], int(item["depth"]))
        for item in _walk(_json_objects(text))
        if isinstance(item.get("slug"), str) and isinstance(item.get("depth"), int)
    ]


@dataclass
class DegradedInvestigator:
    """Health summary → blast radius → a streamed Markdown answer."""

    chunk: int = 8
    delay: float = 0.0
    answers: list[str] = field(default_factory=list)
    slug: str | None = None

    def __call__(self, request: dict[str, Any]) -> Reply:
        results = last_tool_results(request)
        if not results:
            return Reply.tool_use(offered_tool(request, "get_health_summary"), {}, delay=self.delay)
        text = tool_result_text(results[0])
        if self.slug is None or not dependants(text):
            slug = degraded_slug(text)
            if slug is None:
                return self._answer(f"I could not read the health summary: {text[:200]}")
            self.slug = slug
            return Reply.tool_use(offered_tool(request, "get_blast_radius"), {"slug": slug}, delay=self.delay)
        lines = [f"**{self.slug}** is degraded. What depends on it:", ""]
        # The answer echoes the query (`{"slug": ..., "depth": 3, ...}`): the entity is not its own dependant.
        lines += [f"- `{slug}` (depth {depth})" for slug, depth in dependants(text) if slug != self.slug]
        return self._answer("\n".join(lines))

    def _answer(self, answer: str) -> Reply:
        self.answers.append(answer)
        return Reply.text(answer, chunk=self.chunk, delay=self.delay)


@dataclass
class ExecutionRequester:
    """ "restart caddy" / "deploy jellyfin": request the execution, then report what Oikos said."""

    target: str
    action: str
    chunk: int = 8
    delay: float = 0.0
    answers: list[str] = field(default_factory=list)
    params: dict[str, Any] | None = None

    def __call__(self, request: dict[str, Any]) -> Reply:
        results = last_tool_results(request)
        if not results:
            arguments: dict[str, Any] = {
                "target": self.target,
                "action": self.action,
                "reason": "asked by the operator",
            }
            if self.params:
                arguments["params"] = self.params
            return Reply.tool_use(offered_tool(request, "request_execution"), arguments, delay=self.delay)
        outcome = _json_objects(tool_result_text(results[0])) or {}
        if outcome.get("needs_approval"):
            answer = (
                f"The {self.action} of `{self.target}` is **waiting for an operator**: approval "
                f"`{outcome.get('approval_id')}` ({outcome.get('risk_class')})."
            )
        else:
            answer = f"The {self.action} of `{self.target}` finished: **{outcome.get('status', 'unknown')}**."
        self.answers.append(answer)
        return Reply.text(answer, chunk=self.chunk, delay=self.delay)


FACT = re.compile(r"remember that (the [^.\n]+?)\.")


def request_text(request: dict[str, Any]) -> str:
    """Every text the request's messages hold (tool results included), in order."""
    parts: list[str] = []
    for message in request.get("messages", []):
        content = message.get("content")
        if isinstance(content, str):
            parts.append(content)
            continue
        for block in content or []:
            if block.get("type") == "text":
                parts.append(block["text"])
            elif block.get("type") == "tool_result":
                parts.append(tool_result_text(block))
    return "\n".join(parts)


def system_text(request: dict[str, Any]) -> str:
    system = request.get("system") or ""
    return system if isinstance(system, str) else "\n".join(block.get("text", "") for block in system)


@dataclass
class RememberingModel:
    """A model that knows only what the request holds, like a real one, for long sessions.

    - A summarising request (its system prompt asks for a running summary; no tools): a summary
      that keeps every "remember that the …." fact it can read, the summary so far's included.
    - "... remember that the X is Y." → "Noted: …".
    - "What did I ask you to remember?" → every such fact the request holds (the operator's old
      message, or a summary of it), or "Nothing that I can see.".
    - "Show me the log of …" → the `big` tool (`log_bytes` of text), then a short answer.
    - Anything else → a long answer (`answer_chars`), so the conversation grows.
    """

    answer_chars: int = 600
    log_bytes: int = 3000
    summaries: int = 0
    answers: list[str] = field(default_factory=list)

    def __call__(self, request: dict[str, Any]) -> Reply:
        if not request.get("tools") and "running summary" in system_text(request):
            return self._summary(request)
        if last_tool_results(request):
            return self._answer("The log has nothing alarming in it.")
        question = request["messages"][-1]["content"][-1].get("text", "")
        if "What did I ask you to remember?" in question:
            facts = sorted(set(FACT.findall(request_text(request))))
            if not facts:
                return self._answer("Nothing that I can see.")
            return self._answer("You asked me to remember that " + "; and that ".join(facts) + ".")
        if found := FACT.search(question):
            return self._answer(f"Noted: {found.group(1)}.")
        if question.startswith("Show me the log of") and request.get("tools") and request.get("tool_choice") is None:
            return Reply.tool_use(offered_tool(request, "big"), {"size_bytes": self.log_bytes})
        words = f"About that ({question[:40]}): all is well, nothing degraded. "
        return self._answer((words * (self.answer_chars // len(words) + 1))[: self.answer_chars])

    def _summary(self, request: dict[str, Any]) -> Reply:
        self.summaries += 1
        facts = sorted(set(FACT.findall(request_text(request))))
        lines = ["Facts:"] + [f"- The operator asked me to remember that {fact}." for fact in facts]
        lines.append(f"Findings: earlier questions were answered; summary number {self.summaries}.")
        return Reply.text("\n".join(lines))

    def _answer(self, answer: str) -> Reply:
        self.answers.append(answer)
        return Reply.text(answer, chunk=200)


FOLLOWUP_BRIEF = "This is a follow-up Hermes runs on its own"
_REQUESTED = re.compile(r"^- requested: (?P<action>\S+) of (?P<target>\S+)", re.MULTILINE)
_OUTCOME = re.compile(r"^- outcome Oikos reported: (?P<outcome>.*)$", re.MULTILINE)


def last_question(request: dict[str, Any]) -> str:
    """The text of the newest user message that is a question (not tool results)."""
    for message in reversed(request.get("messages", [])):
        if message["role"] != "user":
            continue
        content = message["content"]
        if isinstance(content, str):
            return content
        texts = [block["text"] for block in content if block.get("type") == "text"]
        if texts:
            return "\n".join(texts)
    return ""


def _brief_index(messages: list[dict[str, Any]]) -> int:
    for index in range(len(messages) - 1, -1, -1):
        content = messages[index]["content"]
        texts = (
            [content] if isinstance(content, str) else [b.get("text", "") for b in content if b.get("type") == "text"]
        )
        if messages[index]["role"] == "user" and any(FOLLOWUP_BRIEF in text for text in texts):
            return index
    raise AssertionError("no follow-up brief in the conversation")


@dataclass
class FollowUpChecker:
    """Asks for an execution like `ExecutionRequester`; given a follow-up's brief, checks the target
    the way a careful model does — its entity record, then what depends on it — and ends with the
    verdict the record supports (leading with "not cleared" when it is, as the brief asks)."""

    requester: ExecutionRequester
    checked: list[str] = field(default_factory=list)

    def __call__(self, request: dict[str, Any]) -> Reply:
        question = last_question(request)
        if FOLLOWUP_BRIEF not in question:
            return self.requester(request)
        requested = _REQUESTED.search(question)
        outcome = _OUTCOME.search(question)
        assert requested is not None and outcome is not None, question
        target, said = requested["target"], outcome["outcome"]
        # The follow-up's own tool calls come after its brief in the conversation.
        since = request["messages"][_brief_index(request["messages"]) + 1 :]
        calls = [b for m in since if m["role"] == "assistant" for b in m["content"] if b.get("type") == "tool_use"]
        if said.startswith("failed"):
            error = said.removeprefix("failed").strip(": ")
            return Reply.text(
                f"The {requested['action']} of `{target}` **failed**: {error}. Nothing was changed.\n\n"
                f"Verdict: failed — {error}\nNext step: free space on the guest, then ask again."
            )
        if not calls:
            return Reply.tool_use(offered_tool(request, "get_entity"), {"slug": target})
        if len(calls) == 1:
            self.checked.append(tool_result_text(last_tool_results(request)[0]))
            return Reply.tool_use(offered_tool(request, "get_blast_radius"), {"slug": target})
        entity = _json_objects(self.checked[-1]) or {}
        health, reason = entity.get("health"), entity.get("health_reason")
        if health == "healthy":
            return Reply.text(
                f"`{target}` is healthy again and answers its probes; nothing that depends on it reports trouble."
                f"\n\nVerdict: cleared — {target} is healthy after the {requested['action']}"
            )
        return Reply.text(
            f"Not cleared: `{target}` is {health} after the {requested['action']} ({reason}).\n\n"
            f"Verdict: not cleared — {target} is {health}: {reason}\n"
            "Next step: approve the rollback offered, then check again."
        )
