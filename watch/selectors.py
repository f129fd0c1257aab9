"""Reads about the watcher and its investigations, for `doctor`, `/metrics` and the control room."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Count
from django.utils.dateparse import parse_datetime

from agent import presence
from agent.models import Instance
from watch.models import Investigation, WatchedEvent


@dataclass(frozen=True)
class WatchStatus:
    watchers: int  # `manage.py watch` processes alive now
    ever_ran: bool
    events: int
    last_event_id: str
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
