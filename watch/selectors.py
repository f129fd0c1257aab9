"""Reads about the watcher and its investigations, for `doctor`, `/metrics` and the control room."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

from django.core.paginator import Page, Paginator
from django.db.models import Count, Q
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from agent import presence
from agent.models import Change, Instance
from oikos.change_view import session_change_views
from watch.models import Investigation, Schedule, ScheduleRun, WatchedEvent
from watch.schedules import slot_next


@dataclass(frozen=True)
class WatchStatus:
    watchers: int  # `manage.py watch` processes alive now
    ever_ran: bool
    events: int
    last_event_id: str
    # Which numbering of Oikos's events the last claimed one belongs to (above 1: Oikos numbered anew).
    epoch: int
    last_claimed_at: datetime | None
    # Seconds between Oikos raising the newest claimed event and a watcher claiming it.
    lag_seconds: float | None


def watch_status() -> WatchStatus:
    running = set(Instance.objects.filter(role="watch", stopped_at__isnull=True).values_list("id", flat=True))
    gone, _ = presence.owners_gone(running)
    last = WatchedEvent.objects.order_by("-claimed_at", "-id").first()
    lag = None
    if last is not None:
        raised = parse_datetime(last.at) if last.at else None
        if raised is not None:
            lag = max(0.0, (last.claimed_at - raised).total_seconds())
    return WatchStatus(
        watchers=len(running - gone),
        ever_ran=Instance.objects.filter(role="watch").exists(),
        events=WatchedEvent.objects.count(),
        last_event_id=last.event_id if last else "",
        epoch=last.epoch if last else 1,
        last_claimed_at=last.claimed_at if last else None,
        lag_seconds=lag,
    )


def watch_counts() -> dict[str, Any]:
    """Events claimed by outcome, and investigations skipped by reason (for `/metrics`)."""
    outcomes = dict(WatchedEvent.objects.values_list("outcome").annotate(n=Count("id")).values_list("outcome", "n"))
    skipped = dict(
        Investigation.objects.filter(state=Investigation.State.SKIPPED)
        .values_list("skipped_reason")
        .annotate(n=Count("id"))
        .values_list("skipped_reason", "n")
    )
    return {"outcomes": outcomes, "skipped": skipped}


def investigation_for_sessions(session_ids: list[uuid.UUID]) -> dict[uuid.UUID, Investigation]:
    """The investigation behind each of these sessions that has one."""
    return {
        investigation.session_id: investigation
        for investigation in Investigation.objects.filter(session_id__in=session_ids)
        if investigation.session_id is not None
    }


# --- the control room's page of investigations ------------------------------------------------------


@dataclass(frozen=True)
class InvestigationFilters:
    entity: str = ""
    # One of `Investigation.State` ("" for any).
    state: str = ""
    kind: str = ""


def investigations_page(*, filters: InvestigationFilters, page: int = 1, per_page: int = 50) -> Page[Investigation]:
    """Investigations, newest first, narrowed by `filters` (exact entity, state and kind)."""
    rows = Investigation.objects.order_by("-opened_at", "-id")
    if filters.entity:
        rows = rows.filter(entity=filters.entity)
    if filters.state:
        rows = rows.filter(state=filters.state)
    if filters.kind:
        rows = rows.filter(kind=filters.kind)
    return cast("Page[Investigation]", Paginator(rows, per_page).get_page(page))


def investigation_choices() -> dict[str, list[str]]:
    """The entities and kinds investigations were opened for, for the filter menus."""
    rows = Investigation.objects.exclude(entity="")
    return {
        "entities": list(rows.order_by("entity").values_list("entity", flat=True).distinct()),
        "kinds": list(Investigation.objects.order_by("kind").values_list("kind", flat=True).distinct()),
    }


@dataclass(frozen=True)
class InvestigationNews:
    """What the control room announces about one investigation (plain data: sent over the layer)."""

    id: int
    session_id: str
    title: str
    state: str
    fired_count: int
    escalated: bool
    # How its actions stand (`oikos.change_view`: status, follow-up, verdict of each, as one string
    # that changes when any of them does), and whether one of them still waits for its outcome or
    # its follow-up's verdict (it may change without the state changing).
    actions: str = ""
    acting: bool = False

    def to_message(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "session_id": self.session_id,
            "title": self.title,
            "state": self.state,
            "fired_count": self.fired_count,
            "escalated": self.escalated,
            "actions": self.actions,
            "acting": self.acting,
        }


def investigations_since(*, after_id: int, watched: list[int]) -> list[InvestigationNews]:
    """Investigations opened after `after_id`, and the current state of those in `watched`."""
    rows = list(Investigation.objects.filter(Q(pk__gt=after_id) | Q(pk__in=watched)).order_by("id"))
    return _news(rows)


def investigations_open(*, limit: int) -> list[InvestigationNews]:
    """The newest open investigations, and those whose action waits for its verdict: they may
    still fire again, escalate, resolve, or learn how their action went."""
    acting = Change.objects.filter(session__investigation__isnull=False).exclude(followup__in=SETTLED)
    rows = Investigation.objects.filter(
        Q(state=Investigation.State.OPEN) | Q(session_id__in=acting.values("session_id"))
    ).order_by("-id")[:limit]
    return _news(list(rows))


def _news(rows: list[Investigation]) -> list[InvestigationNews]:
    actions = session_change_views(row.session_id for row in rows)
    news = []
    for row in rows:
        views = actions.get(str(row.session_id), []) if row.session_id else []
        news.append(
            InvestigationNews(
                id=row.pk,
                session_id=str(row.session_id or ""),
                title=row.title,
                state=row.state,
                fired_count=row.fired_count,
                escalated=bool(row.escalation),
                actions="; ".join(
                    f"{view.action} {view.target}: {view.status} {view.followup} {view.verdict}" for view in views
                ),
                acting=any(view.followup not in SETTLED for view in views),
            )
        )
    return news


# A follow-up in these states will not change how an action reads any more.
SETTLED = (Change.FollowUp.DONE, Change.FollowUp.SKIPPED)


def investigation_newest_id() -> int:
    return Investigation.objects.order_by("-id").values_list("id", flat=True).first() or 0


# --- schedules (`manage.py schedule list`, `doctor`, `/metrics`) ----------------------------------------


@dataclass(frozen=True)
class ScheduleRow:
    """A schedule as the operator checks it: when it runs next, how its last run went."""

    id: int
    name: str
    kind: str
    cron: str
    timezone: str
    enabled: bool
    matrix_room: str
    next_run: datetime | None  # None when disabled
    last_slot: datetime | None  # the newest run that was not skipped as missed
    last_state: str
    last_reason: str
    last_verdict: str
    last_finished_at: datetime | None
    skipped: int  # slots recorded skipped, every reason


def schedule_rows(now: datetime | None = None) -> list[ScheduleRow]:
    """Every schedule with its next slot and its latest run (missed slots aside), by name."""
    now = now or timezone.now()
    schedules = list(Schedule.objects.all())
    skipped = dict(
        ScheduleRun.objects.filter(state=ScheduleRun.State.SKIPPED)
        .values_list("schedule_id")
        .annotate(n=Count("id"))
        .values_list("schedule_id", "n")
    )
    latest: dict[int, ScheduleRun] = {}
    for run in ScheduleRun.objects.exclude(skipped_reason="missed").order_by("schedule_id", "-slot"):
        latest.setdefault(run.schedule_id, run)
    rows = []
    for schedule in schedules:
        last = latest.get(schedule.pk)
        rows.append(
            ScheduleRow(
                id=schedule.pk,
                name=schedule.name,
                kind=schedule.kind,
                cron=schedule.cron,
                timezone=schedule.timezone,
                enabled=schedule.enabled,
                matrix_room=schedule.matrix_room,
                next_run=slot_next(schedule, now) if schedule.enabled else None,
                last_slot=last.slot if last else None,
                last_state=last.state if last else "",
                last_reason=last.skipped_reason if last else "",
                last_verdict=last.verdict if last else "",
                last_finished_at=last.finished_at if last else None,
                skipped=skipped.get(schedule.pk, 0),
            )
        )
    return rows
