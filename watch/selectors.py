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


# --- schedules (the Schedules page, the digest card, the Matrix bridge, `schedule list`, doctor, /metrics)


@dataclass(frozen=True)
class ScheduleRow:
    """One schedule as operators check it: what it is, when it runs next, how it last ran."""

    schedule: Schedule
    # The next slot (UTC) while it is enabled; None when disabled.
    next_slot: datetime | None
    # The newest run that is not a slot missed while no watcher ran (a run skipped for the budget
    # is its last run: that is news), if any.
    last_run: ScheduleRun | None
    # Slots recorded skipped, for every reason.
    skipped: int

    @property
    def last_said(self) -> str:
        """The last run's verdict, or why it did not run or failed."""
        return (self.last_run.verdict or self.last_run.skipped_reason) if self.last_run else ""


def schedules_listed(*, now: datetime | None = None) -> list[ScheduleRow]:
    """Every schedule, by name, with its next slot after `now`, its last run and its skipped slots."""
    now = now or timezone.now()
    schedules = list(
        Schedule.objects.annotate(skipped_count=Count("runs", filter=Q(runs__state=ScheduleRun.State.SKIPPED)))
    )
    last_runs: dict[int, ScheduleRun] = {}
    ran = ScheduleRun.objects.exclude(skipped_reason="missed").order_by("schedule_id", "-slot")
    for run in ran.select_related("session").filter(schedule__in=schedules):
        last_runs.setdefault(run.schedule_id, run)
    return [
        ScheduleRow(
            schedule=schedule,
            next_slot=slot_next(schedule, now) if schedule.enabled else None,
            last_run=last_runs.get(schedule.pk),
            skipped=cast(int, schedule.skipped_count),
        )
        for schedule in schedules
    ]


def schedule_runs(*, schedule_id: int, limit: int = 50) -> list[ScheduleRun]:
    """A schedule's runs, newest slot first, skipped slots included (the page's history)."""
    return list(ScheduleRun.objects.filter(schedule_id=schedule_id).select_related("session").order_by("-slot")[:limit])


def digest_latest() -> ScheduleRun | None:
    """The latest digest that ran to the end (the home page's card): done, with a verdict or not."""
    return (
        ScheduleRun.objects.filter(schedule__kind=Schedule.Kind.DIGEST, state=ScheduleRun.State.DONE)
        .select_related("schedule", "session")
        .order_by("-finished_at", "-slot", "-id")
        .first()
    )


def digest_scheduled() -> bool:
    """Whether any digest schedule exists (the card's hint says where to make one when none does)."""
    return Schedule.objects.filter(kind=Schedule.Kind.DIGEST).exists()
