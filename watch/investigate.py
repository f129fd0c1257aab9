"""Running an investigation: the brief, the read-only tool hub, and the escalation it ends with.

An investigation is an ordinary turn — started through the live registry, like a question typed
in the control room — so it has the same ledger, live view and Stop, and the operator continues
its session like any other. Only three things differ: who asks (`agent:hermes`, origin `signal`),
the question (a brief written from the event), and the tools: its origin makes it read-only
(`agent.tools.provenance`: only tools that read, no `a2a_send`); with
`HERMES_INVESTIGATIONS_MAY_PROPOSE` it may also propose an execution, which waits in Hermes for an
operator's approval (`agent.proposals`) before anything reaches Oikos.

The escalation is stored on the investigation when the turn ends: the model is asked to end its
answer with an `## Escalation` section of labelled lines, which is parsed; evidence and approvals
come from the turn's ledger (tool calls under its correlation id), not from what the model says.
A model that left a line out is filled in from what the turn did: the summary from its final
answer, the impact from the blast-radius calls in its ledger.
"""

from __future__ import annotations

import json
import logging
import re
import time
import uuid
from collections.abc import Iterable
from typing import Any

from channels.db import database_sync_to_async

from agent.engine.runner import TurnRejected
from agent.live import turn_registry
from agent.models import Activity, Message, Turn
from agent.tools.hub import ToolHub
from watch import services
from watch.config import WatchConfig
from watch.models import Investigation
from watch.recollection import Recollection, investigation_recollect, recollection_text

logger = logging.getLogger(__name__)

FIELDS = {
    "summary": "summary",
    "impact": "impact",
    "likely cause": "likely_cause",
    "cause": "likely_cause",
    "next step": "next_step",
    "suggested next step": "next_step",
}
_MARKS = re.compile(r"\*\*|`")
_FIELD_LINE = re.compile(r"^\s*[-*]?\s*\**(?P<label>[A-Za-z ]+?)\**\s*:\s*\**\s*(?P<text>.*)$")


def investigation_brief(investigation: Investigation, recollection: Recollection | None = None) -> str:
    """The first question of an investigation: what fired, when, where, what happened the last times
    (`watch.recollection`), and what to come back with."""
    event = investigation.event
    lines = [
        "This is an investigation Hermes opened on its own: no operator asked yet. Oikos raised this event:",
        "",
        f"- event: {event.get('type')} (id {event.get('id')}) at {event.get('at')}",
        f"- entity: {investigation.entity or '(none)'}",
        f"- kind: {investigation.kind}, severity: {investigation.severity}",
        f"- data: {json.dumps(event.get('data', {}), sort_keys=True)}",
    ]
    if investigation.storm:
        lines += [
            "",
            "This is an event storm: more events than the hourly cap of investigations. Summarise them"
            " together (what they have in common, which entity is at the root) instead of one by one:",
            *(
                f"- {e['type']} {e['entity']} {e['kind']} ({e['severity']}): {e['summary']}"
                for e in investigation.storm_events
            ),
        ]
    last_times = recollection_text(recollection)
    if last_times:
        lines += ["", last_times]
    lines += [
        "",
        "Investigate read-only: check the entity's health, what depends on it (blast radius), its"
        " recent logs and executions. "
        + (
            "You may propose an execution with request_execution; it runs only if an operator approves it."
            if WatchConfig.from_settings().may_propose
            else "Do not try to change anything: suggest the next step instead."
        ),
        "End your answer with a section `## Escalation` of exactly these lines:",
        "Summary: …",
        "Impact: … (the blast radius)",
        "Likely cause: …",
        "Next step: …",
    ]
    return "\n".join(lines)


def escalation_parse(answer: str, *, final: str = "") -> dict[str, str]:
    """The labelled lines of the answer's `## Escalation` section (or of the whole answer).

    Without a `Summary:` line the summary is the first paragraph of `final`, the turn's final
    answer (the whole `answer` when it is not given): what the model concluded, not what it said
    it would look at first.
    """
    marker = answer.lower().rfind("## escalation")
    section = answer[marker:] if marker >= 0 else answer
    found: dict[str, str] = {}
    for line in section.splitlines():
        match = _FIELD_LINE.match(line)
        if match is None:
            continue
        key = FIELDS.get(match["label"].strip().lower())
        if key and key not in found:
            found[key] = match["text"].strip().strip("*").strip()
    if "summary" not in found:
        paragraphs = [part.strip() for part in (final or answer).strip().split("\n\n")]
        said = [part for part in paragraphs if part and not part.startswith("#")]
        if said:
            found["summary"] = _plain(said[0])[:500]
    return found


def _plain(markdown: str) -> str:
    """Markdown's emphasis and code marks dropped: the card and the list show the escalation as text."""
    return _MARKS.sub("", markdown)


def escalation_build(*, turn_id: uuid.UUID) -> dict[str, Any]:
    """The escalation of a finished investigation turn: the model's section plus the ledger's facts."""
    turn = Turn.objects.get(pk=turn_id)
    said = [
        "\n\n".join(
            text
            for block in message.content
            if isinstance(block, dict) and block.get("type") == "text"
            for text in [str(block.get("text") or "").strip()]
            if text
        )
        for message in Message.objects.filter(turn_id=turn_id, role=Message.Role.ASSISTANT).order_by("id")
    ]
    said = [text for text in said if text]
    answer = "\n\n".join(said)
    escalation: dict[str, Any] = {"summary": "", "impact": "", "likely_cause": "", "next_step": ""}
    escalation.update(escalation_parse(answer, final=said[-1]) if said else {})
    calls = Activity.objects.filter(correlation_id=turn_id).order_by("started_at", "id")
    if not escalation["impact"]:
        escalation["impact"] = _impact_from_ledger(calls)
    escalation["evidence"] = [
        {
            "tool": call.tool,
            "server": call.server,
            "arguments": call.arguments,
            "state": call.state,
            "correlation_id": str(turn_id),
        }
        for call in calls
    ]
    escalation["approvals"] = [
        {"approval_id": approval_id, "target": call.arguments.get("target"), "action": call.arguments.get("action")}
        for call in calls
        if call.tool == "request_execution" and not call.is_error
        for approval_id in [_approval_id(call.result)]
        if approval_id
    ]
    # Proposed in Hermes instead of sent (HERMES_INVESTIGATIONS_MAY_PROPOSE): the ledger holds the proposal's id.
    escalation["proposals"] = [
        {
            "proposal_id": call.result["proposal_id"],
            "target": call.arguments.get("target"),
            "action": call.arguments.get("action"),
        }
        for call in calls
        if call.tool == "request_execution" and isinstance(call.result, dict) and call.result.get("proposal_id")
    ]
    escalation["correlation_id"] = str(turn_id)
    escalation["turn_status"] = turn.status
    return escalation


def _result_json(record: dict[str, Any]) -> Any:
    """A ledger result's JSON: its structured content, else its text read as JSON (None if it is not)."""
    structured = record.get("structured_content")
    if structured is not None:
        return structured
    texts = [item.get("text", "") for item in record.get("content", []) if isinstance(item, dict)]
    try:
        return json.loads("".join(texts))
    except ValueError:
        return None


def _approval_id(record: dict[str, Any]) -> str:
    """The approval a `request_execution` result says it raised (parked for an operator), or ""."""
    structured = _result_json(record)
    if not isinstance(structured, dict) or not structured.get("needs_approval"):
        return ""
    return str(structured.get("approval_id") or "")


def _impact_from_ledger(calls: Iterable[Activity]) -> str:
    """The impact as the turn's `get_blast_radius` results state it: what depends on each entity."""
    found = []
    for call in calls:
        if call.tool != "get_blast_radius" or call.is_error:
            continue
        radius = _result_json(call.result)
        entries = radius.get("entries") if isinstance(radius, dict) else radius
        if not isinstance(entries, list):
            continue
        slug = str(call.arguments.get("slug") or (radius.get("slug") if isinstance(radius, dict) else "") or "it")
        direct: list[str] = []
        further: list[str] = []
        for entry in entries:
            name = str(entry.get("slug") or entry.get("entity") or "") if isinstance(entry, dict) else ""
            if name and name != slug:
                (direct if entry.get("depth") in (None, 1) else further).append(name)
        if not direct and not further:
            found.append(f"nothing depends on {slug}")
            continue
        parts = [f"directly: {', '.join(direct)}"] if direct else []
        parts += [f"through them: {', '.join(further)}"] if further else []
        count = len(direct) + len(further)
        found.append(f"{count} {'depends' if count == 1 else 'depend'} on {slug} — {'; '.join(parts)}")
    return _plain("; ".join(found))[:500]


async def investigation_run(
    *, investigation_id: int, hub: ToolHub, may_propose: bool | None = None
) -> uuid.UUID | None:
    """Start the investigation's turn, follow it live, and store its escalation when it ends.

    Returns the turn id, or None when the turn could not start (the investigation is then marked
    skipped with the reason, and no model call was made).
    """
    investigation = await database_sync_to_async(Investigation.objects.get)(pk=investigation_id)
    propose = WatchConfig.from_settings().may_propose if may_propose is None else may_propose
    started = time.monotonic()
    # A storm summarises many entities: the last times of one would mislead it.
    recollection = (
        None
        if investigation.storm
        else await database_sync_to_async(investigation_recollect)(investigation_id=investigation_id)
    )
    try:
        handle = await turn_registry().start(
            text=investigation_brief(investigation, recollection),
            actor=services.ACTOR,
            origin=services.ORIGIN,
            session_id=investigation.session_id,
            hub=hub,
            may_propose=propose,
            # A critical signal's investigation may spend the budget's reserve, as operators may.
            critical=investigation.severity == "critical",
        )
    except TurnRejected as exc:
        logger.warning("Investigation %s not started: %s", investigation_id, exc.message)
        await database_sync_to_async(services.investigation_skip)(investigation_id=investigation_id, reason=exc.code)
        return None
    await database_sync_to_async(services.investigation_turn_started)(
        investigation_id=investigation_id, turn_id=handle.turn_id
    )
    logger.info(
        "Investigation %s started turn %s (%.0f ms after the claim)",
        investigation_id,
        handle.turn_id,
        (time.monotonic() - started) * 1000,
    )
    await handle.wait()
    await investigation_escalate(investigation_id=investigation_id, turn_id=handle.turn_id)
    return handle.turn_id


async def investigation_escalate(*, investigation_id: int, turn_id: uuid.UUID) -> None:
    """Store the escalation of the investigation's ended turn."""
    escalation = await database_sync_to_async(escalation_build)(turn_id=turn_id)
    await database_sync_to_async(services.investigation_escalate)(
        investigation_id=investigation_id, escalation=escalation
    )
