"""Writes of the watcher: claiming an event, and what the claim decides (open, count, storm, resolve).

`event_claim` is one transaction: the insert of the event's row is the claim (a unique epoch and
id, so of any number of watchers exactly one wins), and the decision it leads to is taken under a
lock (PostgreSQL: a transaction-level advisory lock; SQLite: its single writer), so two watchers
claiming two firings of one signal cannot both open an investigation for it.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import F, Max
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from agent import presence
from agent.engine import runner
from agent.models import AgentSession, Turn
from common.redaction import redact
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


class EventIdReused(Exception):
    """The event's id is already claimed in this epoch for another event: Oikos numbers anew."""


@dataclass(frozen=True)
class Position:
    """Where a (re)starting watcher resumes: after `event_id` ("" for nothing claimed) of `epoch`."""

    epoch: int
    event_id: str


def watch_cursor() -> Position:
    """The newest claimed event of the newest epoch: where a (re)starting watcher resumes."""
    epoch = WatchedEvent.objects.aggregate(last=Max("epoch"))["last"]
    if epoch is None:
        return Position(epoch=1, event_id="")
    rows = WatchedEvent.objects.filter(epoch=epoch)
    seq = rows.aggregate(last=Max("seq"))["last"]
    if seq is not None:
        return Position(epoch=epoch, event_id=str(seq))
    newest = rows.order_by("-claimed_at", "-id").values_list("event_id", flat=True).first()
    return Position(epoch=epoch, event_id=newest or "")


def _title(trigger: Trigger, event_type: str) -> str:
    # Redacted before it is cut: a cut through a secret would leave its start, which the stored
    # column's redaction no longer recognises.
    where = trigger.entity or "the fleet"
    if event_type == "entity.health_changed":
        health = "down" if trigger.severity == "critical" else "degraded"
        return redact(f"{where} is {health}: {trigger.summary}")[:200]
    return redact(f"{trigger.severity}: {trigger.kind} on {where} — {trigger.summary}")[:200]


def event_seq(event_id: str) -> int | None:
    """A numeric event id as a number (ids sort and compare by it); None for any other id."""
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
    epoch: int = 1,
) -> Claim | None:
    """Claim one event of `epoch` and decide what it means; None when another watcher claimed it first.

    A `backlog` event (history from before the watcher's first start) is claimed, so that it is
    the position to resume from, but decides nothing: no investigation opens, none is resolved.
    Raises `EventIdReused` when the id is claimed in this epoch for a different event (another
    type or time): Oikos numbered its events anew, and the event belongs to the next epoch.
    """
    now = now or timezone.now()
    with transaction.atomic():
        try:
            with transaction.atomic():
                row = WatchedEvent.objects.create(
                    epoch=epoch,
                    event_id=event_id,
                    seq=event_seq(event_id),
                    type=event_type,
                    at=at,
                    data=data,
                    claimed_by=watcher,
                    outcome=WatchedEvent.Outcome.BACKLOG if backlog else WatchedEvent.Outcome.IGNORED,
                )
        except IntegrityError:
            claimed = WatchedEvent.objects.filter(epoch=epoch, event_id=event_id).values_list("type", "at").first()
            if claimed is not None and claimed != (event_type, at):
                raise EventIdReused(event_id) from None
            return None
        if backlog:
            return Claim(outcome=WatchedEvent.Outcome.BACKLOG)
        trigger = policy.trigger(event_type, data)
        if trigger is None:
            return Claim(outcome=WatchedEvent.Outcome.IGNORED)
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_xact_lock(%s)", [DECISION_LOCK_KEY])
        claim = _decide(row=row, trigger=trigger, event_type=event_type, policy=policy, now=now, watcher=watcher)
        row.outcome = claim.outcome
        row.investigation_id = claim.investigation_id
        row.save(update_fields=["outcome", "investigation"])
        return claim


def _decide(
    *,
    row: WatchedEvent,
    trigger: Trigger,
    event_type: str,
    policy: TriggerPolicy,
    now: datetime,
    watcher: uuid.UUID | None = None,
) -> Claim:
    same = Investigation.objects.filter(entity=trigger.entity, storm=False, state=Investigation.State.OPEN)
    raised = _raised(row.at, now)
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
    if repeat is None and trigger.entity and policy.incident_window_seconds > 0:
        # One incident shows as several events (a signal fires, the entity's health drops): any
        # kind raised for the entity within the incident window joins its open investigation.
        window = timedelta(seconds=policy.incident_window_seconds)
        repeat = (
            same.filter(raised_at__gte=raised - window, raised_at__lte=raised + window)
            .order_by("-last_fired_at")
            .first()
        )
    if repeat is not None:
        Investigation.objects.filter(pk=repeat.pk).update(
            fired_count=F("fired_count") + 1, last_fired_at=now, raised_at=max(raised, repeat.raised_at or raised)
        )
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
        return _open(
            title=title,
            trigger=trigger,
            event=event,
            raised=raised,
            storm=True,
            storm_events=[brief],
            watcher=watcher,
        )
    return _open(title=_title(trigger, event_type), trigger=trigger, event=event, raised=raised, watcher=watcher)


def _raised(at: str, now: datetime) -> datetime:
    """When Oikos raised the event: its `at`, or the claim's time when it has none readable."""
    raised = parse_datetime(at) if at else None
    if raised is None:
        return now
    return raised if timezone.is_aware(raised) else raised.replace(tzinfo=UTC)


def _open(
    *,
    title: str,
    trigger: Trigger,
    event: dict[str, Any],
    raised: datetime,
    storm: bool = False,
    storm_events: list[dict[str, Any]] | None = None,
    watcher: uuid.UUID | None = None,
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
        owner=watcher,
        raised_at=raised,
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


def investigation_turn_started(*, investigation_id: int, turn_id: uuid.UUID) -> None:
    """Record the turn running the investigation (`investigations_recover` looks at it)."""
    Investigation.objects.filter(pk=investigation_id).update(turn_id=turn_id)


# An investigation is run at most this many times: its first run, and one retry after its watcher stopped.
INVESTIGATION_RUNS = 2
# Only investigations opened this recently are looked at when a watcher starts.
RECOVERY_WINDOW = timedelta(days=2)


@dataclass(frozen=True)
class Recovery:
    """What `investigations_recover` found: investigations to run again, and those given up."""

    retry: list[int]
    given_up: list[int]
    # Ended turns whose escalation was never stored (their watcher stopped just after): stored now.
    escalate: list[tuple[int, uuid.UUID]]


def investigations_recover(*, watcher: uuid.UUID | None = None, now: datetime | None = None) -> Recovery:
    """Find the open investigations whose watcher stopped before they finished: their turn was
    interrupted, or it never started and their watcher is gone. Each is claimed for one more run
    by this watcher (`retry`; a conditional update, so of two watchers starting together one
    wins), or, run twice already, marked `interrupted` (`given_up`), which its page says.

    Turns that ended without their escalation stored are returned to be escalated (`escalate`).
    Investigations of a watcher still alive are left alone, whatever their state.
    """
    now = now or timezone.now()
    me = watcher or presence.presence_current().instance_id
    candidates = list(
        Investigation.objects.filter(state=Investigation.State.OPEN, opened_at__gte=now - RECOVERY_WINDOW).exclude(
            session__isnull=True
        )
    )
    if not candidates:
        return Recovery(retry=[], given_up=[], escalate=[])
    turns = _investigation_turns(candidates)
    # A turn whose watcher died is `running` until someone looks: this is someone.
    running = any(status == Turn.Status.RUNNING for _turn, status in turns.values())
    if running and presence.turns_interrupt_orphaned(running=runner.running):
        turns = _investigation_turns(candidates)
    owners = {row.owner for row in candidates if row.owner is not None and row.owner != me}
    gone, undecided = presence.owners_gone(owners)
    stale = now - timedelta(seconds=settings.HERMES_TURN_STALE_SECONDS)
    retry: list[int] = []
    given_up: list[int] = []
    escalate: list[tuple[int, uuid.UUID]] = []
    for row in candidates:
        turn = turns.get(row.pk)
        finished = bool(row.escalation) and row.escalation.get("turn_status") != Turn.Status.INTERRUPTED
        if finished:
            continue
        if turn is not None:
            turn_id, status = turn
            if status == Turn.Status.RUNNING:
                continue
            if status != Turn.Status.INTERRUPTED:
                if not row.escalation:
                    escalate.append((row.pk, turn_id))
                continue
        elif row.owner == me or row.owner in undecided or (row.owner is not None and row.owner not in gone):
            # Not started yet by a watcher that lives (a storm gathering, a turn about to start).
            continue
        elif row.owner is None and row.opened_at > stale:
            continue
        if row.attempts >= INVESTIGATION_RUNS:
            if Investigation.objects.filter(pk=row.pk, state=Investigation.State.OPEN).update(
                state=Investigation.State.INTERRUPTED
            ):
                given_up.append(row.pk)
        elif Investigation.objects.filter(pk=row.pk, state=Investigation.State.OPEN, attempts=row.attempts).update(
            attempts=row.attempts + 1, owner=me, turn_id=None, escalation={}
        ):
            retry.append(row.pk)
    return Recovery(retry=retry, given_up=given_up, escalate=escalate)


def _investigation_turns(rows: list[Investigation]) -> dict[int, tuple[uuid.UUID, str]]:
    """Each investigation's turn (id, status): the one it recorded, else its session's latest by
    Hermes (investigations opened before turns were recorded on them)."""
    recorded = {row.turn_id for row in rows if row.turn_id is not None}
    statuses = dict(Turn.objects.filter(pk__in=recorded).values_list("id", "status"))
    unrecorded = {row.session_id for row in rows if row.turn_id is None and row.attempts <= 1}
    latest: dict[uuid.UUID, tuple[uuid.UUID, str]] = {}
    for session_id, turn_id, status in (
        Turn.objects.filter(session_id__in=unrecorded, actor=ACTOR)
        .order_by("started_at")
        .values_list("session_id", "id", "status")
    ):
        latest[session_id] = (turn_id, status)
    found: dict[int, tuple[uuid.UUID, str]] = {}
    for row in rows:
        if row.turn_id is not None and row.turn_id in statuses:
            found[row.pk] = (row.turn_id, statuses[row.turn_id])
        elif row.turn_id is None and row.session_id in latest:
            found[row.pk] = latest[row.session_id]
    return found
