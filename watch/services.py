"""Writes of the watcher: claiming an event, and what the claim decides (open, count, storm, resolve).

`event_claim` is one transaction: the insert of the event's row is the claim (a unique id, so of
any number of watchers exactly one wins), and the decision it leads to is taken under a lock
(PostgreSQL: a transaction-level advisory lock; SQLite: its single writer), so two watchers
claiming two firings of one signal cannot both open an investigation for it.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import IntegrityError, connection, transaction
from django.db.models import F, Max
from django.utils import timezone

from agent.models import AgentSession
from agent.redaction import redact
from watch.models import Investigation, WatchedEvent
from watch.policy import Trigger, TriggerPolicy

ACTOR = "agent:hermes"
ORIGIN = "signal"
# Any constant the other advisory locks of Hermes do not use (presence uses per-process keys).
DECISION_LOCK_KEY = 0x48_57_41_54_43_48  # "HWATCH"


@dataclass(frozen=True)
class Claim:
    """What this watcher must do after claiming an event: run `investigation_id` when `start`."""

    outcome: str
    investigation_id: int | None = None
    session_id: uuid.UUID | None = None
    start: bool = False
    storm: bool = False


def watch_cursor() -> str:
    """The id of the newest claimed event: where a (re)starting watcher resumes."""
    seq = WatchedEvent.objects.aggregate(last=Max("seq"))["last"]
    if seq is not None:
        return str(seq)
    newest = WatchedEvent.objects.order_by("-claimed_at", "-id").values_list("event_id", flat=True).first()
    return newest or ""


def _title(trigger: Trigger, event_type: str) -> str:
    # Redacted before it is cut: a cut through a secret would leave its start, which the stored
    # column's redaction no longer recognises.
    where = trigger.entity or "the fleet"
    if event_type == "entity.health_changed":
        health = "down" if trigger.severity == "critical" else "degraded"
        return redact(f"{where} is {health}: {trigger.summary}")[:200]
    return redact(f"{trigger.severity}: {trigger.kind} on {where} — {trigger.summary}")[:200]


def _seq(event_id: str) -> int | None:
    return int(event_id) if event_id.isdigit() else None


def event_claim(
    *,
    event_id: str,
    event_type: str,
    at: str,
    data: dict[str, Any],
    policy: TriggerPolicy,
    watcher: uuid.UUID | None = None,
    now: datetime | None = None,
    backlog: bool = False,
) -> Claim | None:
    """Claim one event and decide what it means; None when another watcher claimed it first.

    A `backlog` event (history from before the watcher's first start) is claimed, so that it is
    the position to resume from, but decides nothing: no investigation opens, none is resolved.
    """
    now = now or timezone.now()
    with transaction.atomic():
        try:
            with transaction.atomic():
                row = WatchedEvent.objects.create(
                    event_id=event_id,
                    seq=_seq(event_id),
                    type=event_type,
                    at=at,
                    data=data,
                    claimed_by=watcher,
                    outcome=WatchedEvent.Outcome.BACKLOG if backlog else WatchedEvent.Outcome.IGNORED,
                )
        except IntegrityError:
            return None
        if backlog:
            return Claim(outcome=WatchedEvent.Outcome.BACKLOG)
        trigger = policy.trigger(event_type, data)
        if trigger is None:
            return Claim(outcome=WatchedEvent.Outcome.IGNORED)
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_xact_lock(%s)", [DECISION_LOCK_KEY])
        claim = _decide(row=row, trigger=trigger, event_type=event_type, policy=policy, now=now)
        row.outcome = claim.outcome
        row.investigation_id = claim.investigation_id
        row.save(update_fields=["outcome", "investigation"])
        return claim


def _decide(*, row: WatchedEvent, trigger: Trigger, event_type: str, policy: TriggerPolicy, now: datetime) -> Claim:
    same = Investigation.objects.filter(entity=trigger.entity, storm=False, state=Investigation.State.OPEN)
    if trigger.action == "resolve":
        # `signal.resolved` closes its kind; health back to healthy closes everything on the entity.
        closing = same if trigger.kind == "health" else same.filter(kind=trigger.kind)
        resolved = list(closing.values_list("id", flat=True))
        closing.update(state=Investigation.State.RESOLVED, resolved_at=now)
        return Claim(
            outcome=WatchedEvent.Outcome.RESOLVED if resolved else WatchedEvent.Outcome.IGNORED,
            investigation_id=resolved[0] if resolved else None,
        )
    cooldown_from = now - timedelta(seconds=policy.cooldown_seconds)
    repeat = same.filter(kind=trigger.kind, last_fired_at__gte=cooldown_from).order_by("-last_fired_at").first()
    if repeat is not None:
        Investigation.objects.filter(pk=repeat.pk).update(fired_count=F("fired_count") + 1, last_fired_at=now)
        return Claim(outcome=WatchedEvent.Outcome.SUPPRESSED, investigation_id=repeat.pk)
    hour_ago = now - timedelta(hours=1)
    opened = Investigation.objects.filter(opened_at__gte=hour_ago, storm=False).exclude(
        state=Investigation.State.SKIPPED
    )
    event = {"id": row.event_id, "type": event_type, "at": row.at, "data": row.data}
    brief = {
        "id": row.event_id,
        "type": event_type,
        "entity": trigger.entity,
        "kind": trigger.kind,
        "severity": trigger.severity,
        "summary": trigger.summary,
    }
    if opened.count() >= policy.hourly_cap:
        storm = Investigation.objects.filter(storm=True, opened_at__gte=hour_ago).order_by("-opened_at").first()
        if storm is not None:
            Investigation.objects.filter(pk=storm.pk).update(fired_count=F("fired_count") + 1, last_fired_at=now)
            storm.refresh_from_db(fields=["storm_events"])
            storm.storm_events = [*storm.storm_events, brief]
            storm.save(update_fields=["storm_events"])
            return Claim(outcome=WatchedEvent.Outcome.SUPPRESSED, investigation_id=storm.pk)
        title = f"Event storm: more than {policy.hourly_cap} investigations within an hour"
        return _open(title=title, trigger=trigger, event=event, now=now, storm=True, storm_events=[brief])
    return _open(title=_title(trigger, event_type), trigger=trigger, event=event, now=now)


def _open(
    *,
    title: str,
    trigger: Trigger,
    event: dict[str, Any],
    now: datetime,
    storm: bool = False,
    storm_events: list[dict[str, Any]] | None = None,
) -> Claim:
    session = AgentSession.objects.create(actor=ACTOR, origin=ORIGIN, title=title)
    investigation = Investigation.objects.create(
        session=session,
        entity="" if storm else trigger.entity,
        kind="storm" if storm else trigger.kind,
        severity=trigger.severity,
        title=title,
        storm=storm,
        first_event_id=str(event["id"]),
        event=event,
        storm_events=storm_events or [],
    )
    return Claim(
        outcome=WatchedEvent.Outcome.OPENED,
        investigation_id=investigation.pk,
        session_id=session.id,
        start=True,
        storm=storm,
    )


def investigation_escalate(*, investigation_id: int, escalation: dict[str, Any]) -> None:
    """Store the escalation the investigation's turn ended with."""
    Investigation.objects.filter(pk=investigation_id).update(escalation=escalation)


def investigation_skip(*, investigation_id: int, reason: str) -> None:
    """Mark an investigation recorded without a model call (`reason`: budget, llm_not_configured, ...)."""
    Investigation.objects.filter(pk=investigation_id).update(
        state=Investigation.State.SKIPPED, skipped_reason=reason[:40]
    )
