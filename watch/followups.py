"""Follow-ups: after an execution Hermes asked for finishes, Hermes checks it did what it was meant to.

The watcher hears every Oikos event. Those of an execution on Hermes's record
(`agent.store.changes`) keep the record current — status, who decided, error, when it finished —
and tell the pages (`changes_changed_publish`). When it finished, its follow-up is claimed, once
across every watcher (`changes.followup_claim`, one conditional update), and run by the winner:

1. it waits the settle time the action suggests (`TriggerPolicy.settle_seconds`): a restarted
   service needs a moment before its probes mean anything, a deployed one longer;
2. it waits for a turn still running in the session (the one that asked, typically), bounded;
3. it continues the session with a turn of its own (origin `followup`, actor `agent:hermes`,
   read-only tools) whose brief says what was asked, by whom, how Oikos said it ended, and asks
   to re-check the target, the signal an investigation was opened for, and the dependents, then
   to end with `Verdict: cleared|not cleared|failed — …`;
4. the verdict is parsed from the turn's final answer (`verdict_parse`) and stored; a turn that
   gave none gets the conservative one (a failed execution failed; otherwise not cleared);
5. a completed change Oikos can roll back (`changes.undo_for`) that did not clear gets its rollback
   offered as a proposal an operator approves (`agent.proposals.undo_propose`) — never run without
   it. One that cleared leaves no proposal waiting in the rail: its card's Undo button offers it.

A follow-up that cannot run is marked skipped with the reason (no model, the budget is spent,
the session stayed busy). One whose watcher died is run once more by the next watcher to start
(`followups_recover`), like an investigation, or marked skipped when it already was; a finished
execution whose follow-up nobody claimed (it ended while no watcher ran) is claimed then.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from channels.db import database_sync_to_async
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from agent import presence
from agent.broadcast import changes_changed_publish
from agent.engine import runner
from agent.engine.runner import TurnRejected
from agent.live import turn_registry
from agent.models import Change, Message, Turn
from agent.proposals import proposals_changed_publish, undo_propose
from agent.store import changes
from agent.tools.hub import ToolHub
from oikos.client import OikosClient, OikosError
from watch.models import Investigation
from watch.policy import TriggerPolicy

logger = logging.getLogger(__name__)

ACTOR = "agent:hermes"
ORIGIN = "followup"
# How long a follow-up waits for a turn still running in its session before it gives up.
BUSY_WAIT_SECONDS = 300.0
BUSY_POLL_SECONDS = 0.25
# The events that say something about an execution, and the status each one means.
EXECUTION_EVENTS = {
    "execution.started": "running",
    "execution.completed": "completed",
    "execution.failed": "failed",
}
APPROVAL_EVENTS = frozenset({"approval.created", "approval.decided"})
# Marks a follow-up taken over from a watcher that stopped: a second stop skips it.
RETRIED_NOTE = "run again: the watcher that claimed it stopped"
NO_VERDICT = "the follow-up gave no verdict"
# A verdict line's separators: colon, hyphen, en dash, em dash.
_DASHES = ":\\-\u2013\u2014"
_VERDICT_LINE = re.compile(
    rf"^[\s>*_#-]*verdict[\s*_]*[{_DASHES}][\s*_]*(?P<verdict>not[\s_-]*cleared|cleared|failed)\b[\s*_.]*"
    rf"(?:[{_DASHES},.]+\s*)?(?P<detail>.*)$",
    re.IGNORECASE | re.MULTILINE,
)
_NEXT_LINE = re.compile(r"^[\s>*_#-]*next step[\s*_]*:[\s*_]*(?P<text>.+)$", re.IGNORECASE | re.MULTILINE)
_MARKS = re.compile(r"\*\*|`|__")


@dataclass(frozen=True)
class Verdict:
    verdict: str  # a `Change.Verdict` value
    detail: str


def is_change_event(event_type: str) -> bool:
    return event_type in EXECUTION_EVENTS or event_type in APPROVAL_EVENTS


def change_event_apply(event_type: str, data: dict[str, Any]) -> Change | None:
    """Bring Hermes's record of the event's execution up to date; None when Hermes did not ask for it."""
    execution_id = str(data.get("execution_id") or "")
    if not execution_id:
        return None
    if event_type in EXECUTION_EVENTS:
        finished = parse_datetime(str(data.get("finished_at") or "")) if data.get("finished_at") else None
        return changes.change_status(
            execution_id=execution_id,
            status=EXECUTION_EVENTS[event_type],
            decided_by=str(data.get("decided_by") or ""),
            error=str(data.get("error") or ""),
            finished_at=finished,
        )
    if event_type == "approval.decided":
        status = str(data.get("execution_status") or data.get("decision") or "")
        if not status:
            return changes.change_get(execution_id=execution_id)
        return changes.change_status(
            execution_id=execution_id, status=status, decided_by=str(data.get("decided_by") or "")
        )
    if event_type == "approval.created":
        change = changes.change_get(execution_id=execution_id)
        if change is not None and not change.status:
            return changes.change_status(execution_id=execution_id, status="proposed")
        return change
    return None


def instance_of(watcher: uuid.UUID | None) -> uuid.UUID:
    return watcher or presence.presence_current().instance_id


# --- the brief -------------------------------------------------------------------------------------


def followup_brief(change: Change, *, settled: float) -> str:
    """The follow-up turn's question: what was asked, how it ended, what to check, how to answer."""
    params = f" with {json.dumps(change.params, sort_keys=True)}" if change.params else ""
    decided = change.decided_by or "Oikos's policy (it ran without an approval)"
    outcome = change.status + (f": {change.error}" if change.error else "")
    lines = [
        "This is a follow-up Hermes runs on its own: no operator asked. Earlier in this session Hermes"
        " asked Oikos for an execution, and Oikos reports it finished. Check whether it did what it was"
        " meant to.",
        "",
        f"- requested: {change.action} of {change.target}{params} (execution {change.execution_id})",
        f"- why: {change.reason or '(no reason given)'}",
        f"- asked by: {change.asked_by or 'unknown'}; decided by: {decided}",
        f"- outcome Oikos reported: {outcome}",
        f"- finished at: {change.finished_at.isoformat() if change.finished_at else 'unknown'}"
        + (f"; this check starts {settled:.0f} s after" if settled else ""),
    ]
    investigation = Investigation.objects.filter(session_id=change.session_id).first() if change.session_id else None
    if investigation is not None:
        summary = str(investigation.event.get("data", {}).get("summary") or investigation.title)
        lines += [
            "",
            f"This session is an investigation of {investigation.kind} on {investigation.entity or '(no entity)'}"
            f" ({summary}): check whether that signal has cleared.",
        ]
    lines += [
        "",
        f"Re-check read-only: the health and probes of {change.target} (its entity and service status),"
        " the signal that led to the action if there was one, and what depends on it (blast radius)."
        " Do not change anything.",
    ]
    if change.status == "failed":
        lines.append(
            "The execution failed, so nothing was changed: say so with Oikos's error, what it means, and the next step."
        )
    elif changes.undo_for(change) is not None:
        lines.append(
            f"A {change.action} is a risky change Oikos can roll back. If it did not clear what it was"
            " meant to, say **not cleared** in your first sentence, before anything else: a rollback"
            " is offered for an operator to approve."
        )
    lines += [
        "",
        "End your answer with exactly one line:",
        "Verdict: cleared|not cleared|failed — <one line why>",
        "and, when not cleared or failed, a line `Next step: …`.",
    ]
    return "\n".join(lines)


def verdict_parse(answer: str) -> Verdict | None:
    """The last `Verdict:` line of the answer (markdown marks and case forgiven); None without one."""
    found = list(_VERDICT_LINE.finditer(answer))
    if not found:
        return None
    match = found[-1]
    word = re.sub(r"[\s_-]+", " ", match["verdict"].lower())
    verdict = {"cleared": Change.Verdict.CLEARED, "not cleared": Change.Verdict.NOT_CLEARED}.get(
        word, Change.Verdict.FAILED
    )
    detail = _MARKS.sub("", match["detail"]).strip(" *_.-:\u2013\u2014")
    following = answer[match.end() :]
    next_step = _NEXT_LINE.search(following) or _NEXT_LINE.search(answer)
    if next_step is not None and verdict != Change.Verdict.CLEARED:
        step = _MARKS.sub("", next_step["text"]).strip(" *_")
        detail = f"{detail}; next step: {step}" if detail else f"Next step: {step}"
    return Verdict(str(verdict), detail[:1000])


def verdict_derive(change: Change, answer: str, turn_status: str) -> Verdict:
    """The verdict the answer states, else the conservative one the facts allow."""
    said = verdict_parse(answer) if turn_status == Turn.Status.DONE else None
    if said is not None:
        return said
    if change.status == "failed":
        return Verdict(str(Change.Verdict.FAILED), change.error or "Oikos reported the execution failed")
    why = NO_VERDICT if turn_status == Turn.Status.DONE else f"{NO_VERDICT}: its turn ended {turn_status}"
    return Verdict(str(Change.Verdict.NOT_CLEARED), why)


def turn_answer(turn_id: uuid.UUID) -> tuple[str, str]:
    """The turn's status and its final answer (its last assistant text)."""
    turn = Turn.objects.get(pk=turn_id)
    said = [
        "\n\n".join(
            str(block.get("text") or "").strip()
            for block in message.content
            if isinstance(block, dict) and block.get("type") == "text" and str(block.get("text") or "").strip()
        )
        for message in Message.objects.filter(turn_id=turn_id, role=Message.Role.ASSISTANT).order_by("id")
    ]
    said = [text for text in said if text]
    return turn.status, (said[-1] if said else "")


def followup_conclude(*, execution_id: str, turn_id: uuid.UUID) -> tuple[Change | None, bool]:
    """Store the verdict of the follow-up's ended turn; offer the rollback of a change that can be
    undone and did not clear. Returns the change and whether a proposal was opened."""
    change = changes.change_get(execution_id=execution_id)
    if change is None:
        return None, False
    status, answer = turn_answer(turn_id)
    found = verdict_derive(change, answer, status)
    change = changes.verdict_record(execution_id=execution_id, verdict=found.verdict, detail=found.detail)
    proposed = False
    if (
        change is not None
        and change.verdict != Change.Verdict.CLEARED
        and changes.undo_for(change) is not None
        and change.undo_proposal_id is None
    ):
        proposed = undo_propose(execution_id=execution_id, proposed_by=ACTOR, correlation_id=turn_id) is not None
        change.refresh_from_db()
    return change, proposed


# --- running ---------------------------------------------------------------------------------------


def _session_busy(session_id: uuid.UUID) -> bool:
    return Turn.objects.filter(session_id=session_id, status=Turn.Status.RUNNING).exists()


def _skip(execution_id: str, reason: str) -> Change | None:
    changes.followup_skip(execution_id=execution_id, reason=reason)
    return changes.change_get(execution_id=execution_id)


SKIP_REASONS = {
    "llm_not_configured": "no model is configured",
    "budget_exhausted": "the daily budget is spent",
    "rate_limited": "the model's rate limit was reached",
    "shutting_down": "Hermes was shutting down",
    "session_not_found": "its session was deleted",
}


async def followup_run(
    *,
    execution_id: str,
    hub: ToolHub,
    policy: TriggerPolicy,
    busy_wait: float = BUSY_WAIT_SECONDS,
    settle: bool = True,
) -> uuid.UUID | None:
    """Run the claimed follow-up of a finished execution to its verdict; the follow-up turn's id,
    or None when it was skipped (the reason is stored)."""
    change = await database_sync_to_async(changes.change_get)(execution_id=execution_id)
    if change is None:
        return None
    if change.session_id is None:
        await _skipped(change, "the execution was asked outside any session: there is nothing to continue")
        return None
    seconds = policy.settle_seconds(change.action, change.status) if settle else 0.0
    if seconds:
        await asyncio.sleep(seconds)
    deadline = asyncio.get_running_loop().time() + busy_wait
    while True:
        while await database_sync_to_async(_session_busy)(change.session_id):
            if asyncio.get_running_loop().time() >= deadline:
                break
            await asyncio.sleep(BUSY_POLL_SECONDS)
        change = await database_sync_to_async(changes.change_get)(execution_id=execution_id) or change
        brief = await database_sync_to_async(followup_brief)(change, settled=seconds)
        try:
            handle = await turn_registry().start(
                text=brief, actor=ACTOR, origin=ORIGIN, session_id=change.session_id, hub=hub, may_propose=False
            )
            break
        except TurnRejected as exc:
            if exc.busy and asyncio.get_running_loop().time() < deadline:
                await asyncio.sleep(BUSY_POLL_SECONDS)
                continue
            reason = (
                "the session was still busy with another turn"
                if exc.busy
                else SKIP_REASONS.get(exc.code, exc.message or exc.code)
            )
            logger.warning("Follow-up of %s not started: %s", execution_id, reason)
            await _skipped(change, reason)
            return None
    await database_sync_to_async(changes.followup_started)(execution_id=execution_id, turn_id=handle.turn_id)
    await changes_changed_publish(execution_id=execution_id, session_id=change.session_id)
    logger.info(
        "Follow-up of %s (%s of %s) started turn %s", execution_id, change.action, change.target, handle.turn_id
    )
    await handle.wait()
    await followup_finish(execution_id=execution_id, turn_id=handle.turn_id)
    return handle.turn_id


async def followup_finish(*, execution_id: str, turn_id: uuid.UUID) -> None:
    concluded, proposed = await database_sync_to_async(followup_conclude)(execution_id=execution_id, turn_id=turn_id)
    if proposed:
        await proposals_changed_publish()
    if concluded is not None:
        logger.info("Follow-up of %s: %s (%s)", execution_id, concluded.verdict, concluded.verdict_detail)
        await changes_changed_publish(execution_id=execution_id, session_id=concluded.session_id)


async def _skipped(change: Change, reason: str) -> None:
    await database_sync_to_async(_skip)(change.execution_id, reason)
    await changes_changed_publish(execution_id=change.execution_id, session_id=change.session_id)


async def execution_detail(execution_id: str) -> dict[str, Any]:
    """What Oikos says of the execution now (who decided, its error), or {} when it cannot say."""
    try:
        async with OikosClient.from_settings() as oikos:
            return await oikos.execution(execution_id)
    except (OikosError, OSError) as exc:
        logger.warning("Could not read execution %s from Oikos: %s", execution_id, exc)
        return {}


# --- recovery --------------------------------------------------------------------------------------


# How far back a starting watcher looks for finished executions nobody followed up (their events
# came while no watcher ran, or before Hermes's record of them was written).
UNCLAIMED_WINDOW = timedelta(hours=1)


@dataclass(frozen=True)
class FollowUpRecovery:
    retry: list[str]  # execution ids to run again
    conclude: list[tuple[str, uuid.UUID]]  # turns that ended without their verdict stored
    given_up: list[str]
    # Finished executions nobody had claimed the follow-up of: claimed now, run from the start.
    unclaimed: list[str] = field(default_factory=list)


def followups_recover(*, watcher: uuid.UUID | None = None, now: datetime | None = None) -> FollowUpRecovery:
    """Find the follow-ups claimed by a watcher that stopped before they ended: each is run once
    more by this watcher (a conditional update, so of two watchers starting together one wins),
    or, already run again once, skipped with the reason. A turn that ended but whose verdict was
    not stored is concluded. Follow-ups of a watcher still alive are left alone."""
    me = instance_of(watcher)
    now = now or timezone.now()
    unclaimed = [
        execution_id
        for execution_id in Change.objects.filter(
            followup=Change.FollowUp.PENDING, status__in=changes.FINISHED, requested_at__gte=now - UNCLAIMED_WINDOW
        ).values_list("execution_id", flat=True)
        if changes.followup_claim(execution_id=execution_id, instance=me) is not None
    ]
    rows = list(Change.objects.filter(followup=Change.FollowUp.CLAIMED).exclude(followup_by=me))
    if not rows:
        return FollowUpRecovery(retry=[], conclude=[], given_up=[], unclaimed=unclaimed)
    turn_ids = [row.followup_turn_id for row in rows if row.followup_turn_id is not None]
    if Turn.objects.filter(pk__in=turn_ids, status=Turn.Status.RUNNING).exists():
        presence.turns_interrupt_orphaned(running=runner.running)
    statuses = dict(Turn.objects.filter(pk__in=turn_ids).values_list("id", "status"))
    gone, _undecided = presence.owners_gone({row.followup_by for row in rows if row.followup_by is not None})
    retry: list[str] = []
    conclude: list[tuple[str, uuid.UUID]] = []
    given_up: list[str] = []
    for row in rows:
        if row.followup_by is not None and row.followup_by not in gone:
            continue
        status = statuses.get(row.followup_turn_id) if row.followup_turn_id is not None else None
        if status == Turn.Status.RUNNING:
            continue
        if status is not None and status != Turn.Status.INTERRUPTED:
            assert row.followup_turn_id is not None
            conclude.append((row.execution_id, row.followup_turn_id))
            continue
        if row.followup_note == RETRIED_NOTE:
            changes.followup_skip(
                execution_id=row.execution_id, reason="its watcher stopped twice before the follow-up ended"
            )
            given_up.append(row.execution_id)
        elif Change.objects.filter(
            pk=row.pk, followup=Change.FollowUp.CLAIMED, followup_by=row.followup_by, followup_note=row.followup_note
        ).update(followup_by=me, followup_turn=None, followup_note=RETRIED_NOTE, followup_claimed_at=timezone.now()):
            retry.append(row.execution_id)
    return FollowUpRecovery(retry=retry, conclude=conclude, given_up=given_up, unclaimed=unclaimed)
