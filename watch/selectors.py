"""Reads about the watcher and its investigations, for `doctor`, `/metrics` and the control room."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

from django.core.paginator import Page, Paginator
from django.db.models import Count, Q
from django.utils.dateparse import parse_datetime

from agent import presence
from agent.models import Change, Instance
from agent.store.changes import FINISHED
from watch.models import Investigation, WatchedEvent


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
    # How its actions stand ("restart service:sonarr: verified: cleared"), and whether one of them
    # still waits for its outcome or its follow-up's verdict (it may change without the state changing).
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
    actions = investigation_actions(session_ids=[row.session_id for row in rows if row.session_id])
    news = []
    for row in rows:
        lines = actions.get(row.session_id, []) if row.session_id else []
        news.append(
            InvestigationNews(
                id=row.pk,
                session_id=str(row.session_id or ""),
                title=row.title,
                state=row.state,
                fired_count=row.fired_count,
                escalated=bool(row.escalation),
                actions="; ".join(f"{line.action} {line.target}: {line.outcome}" for line in lines),
                acting=any(not line.settled for line in lines),
            )
        )
    return news


# --- what an investigation's session asked Oikos to do, and how it went -----------------------------

# A follow-up in these states will not change the line any more.
SETTLED = (Change.FollowUp.DONE, Change.FollowUp.SKIPPED)


@dataclass(frozen=True)
class ChangeLine:
    """One execution an investigation's session asked for, as its card and its row show it."""

    execution_id: str
    session_id: str
    action: str
    target: str
    # Where it stands, in words: "verified: cleared", "checking…", "not checked: <why>", …
    outcome: str
    verdict: str
    detail: str
    # The follow-up turn that checked it ("" when none ran), for a link to it.
    followup_turn_id: str
    settled: bool


def investigation_actions(*, session_ids: list[uuid.UUID]) -> dict[uuid.UUID, list[ChangeLine]]:
    """The executions each of these sessions asked for, oldest first."""
    lines: dict[uuid.UUID, list[ChangeLine]] = {}
    for change in Change.objects.filter(session_id__in=session_ids).order_by("requested_at", "id"):
        assert change.session_id is not None
        lines.setdefault(change.session_id, []).append(_change_line(change))
    return lines


def _change_line(change: Change) -> ChangeLine:
    return ChangeLine(
        execution_id=change.execution_id,
        session_id=str(change.session_id),
        action=change.action,
        target=change.target,
        outcome=change_outcome(change),
        verdict=change.verdict,
        detail=change.verdict_detail if change.verdict else "",
        followup_turn_id=str(change.followup_turn_id or ""),
        settled=change.followup in SETTLED,
    )


def change_outcome(change: Change) -> str:
    """How an execution went, as far as Hermes knows: its follow-up's verdict once there is one."""
    if change.verdict:
        return f"verified: {str(Change.Verdict(change.verdict).label).lower()}"
    if change.followup == Change.FollowUp.SKIPPED:
        return f"not checked: {change.followup_note}" if change.followup_note else "not checked"
    if change.followup == Change.FollowUp.CLAIMED:
        return "checking…"
    if change.status in FINISHED:
        return f"{change.status}, to be checked"
    if change.status == "proposed":
        return "waiting for approval"
    return change.status or "requested"


def investigation_newest_id() -> int:
    return Investigation.objects.order_by("-id").values_list("id", flat=True).first() or 0
