"""Hermes's record of executions as readers see it: `GET /changes`, the Changes page and the
`changes_since` tool (`oikos.changes_tool`) list the same entries, built here from
`agent.models.Change` with what each row points at (its session, its follow-up turn, its undo).

Filters are parsed here too, strictly: a bad `since` is an error that says what is accepted,
never a silently empty (or silently unfiltered) list.
"""

from __future__ import annotations

import datetime
import re
import uuid
from dataclasses import dataclass
from typing import Any

from django.db.models import Q
from django.utils import timezone
from django.utils.dateparse import parse_date, parse_datetime

from agent.models import AgentSession, Change, Proposal

LIMIT_DEFAULT = 50
LIMIT_MAX = 200
TARGET_MAX_CHARS = 200

# "24h", "90m", "7d", "2w": a span back from now (the tool's relative times).
_SPAN = re.compile(r"^(\d{1,4})\s*(m|min|h|d|w)$")
_SPAN_UNITS = {"m": "minutes", "min": "minutes", "h": "hours", "d": "days", "w": "weeks"}


class FilterError(ValueError):
    """A filter that cannot be read; its message says what would be."""


@dataclass(frozen=True)
class ChangeFilters:
    target: str = ""
    since: datetime.datetime | None = None
    until: datetime.datetime | None = None
    session_id: uuid.UUID | None = None
    limit: int = LIMIT_DEFAULT
    # Keyset: only changes listed after this execution (older than it).
    before: str = ""


def target_parse(raw: str | None) -> str:
    """A slug (`service:postgres`) or a kind with its colon (`service:`); "" for every target."""
    value = (raw or "").strip()
    if len(value) > TARGET_MAX_CHARS:
        raise FilterError(f"target may be at most {TARGET_MAX_CHARS} characters.")
    if value and (":" not in value or "\x00" in value or any(c.isspace() for c in value)):
        raise FilterError(f"target must be a slug (service:postgres) or a kind (service:), not {value[:40]!r}.")
    return value


def moment_parse(
    raw: str | None,
    *,
    name: str,
    end_of_day: bool = False,
    relative: bool = False,
    now: datetime.datetime | None = None,
) -> datetime.datetime | None:
    """An ISO 8601 date and time (with its offset; UTC without one) or a date alone (the whole
    day, in UTC: `until` a date includes that day). With `relative`, also a span back from now
    (`24h`, `90m`, `7d`, `2w`), `today` or `yesterday` (from the start of that day, UTC).
    None for an empty value; `FilterError` for anything else."""
    value = (raw or "").strip()
    if not value:
        return None
    now = now or timezone.now()
    if relative:
        lowered = value.lower()
        today = now.astimezone(datetime.UTC).replace(hour=0, minute=0, second=0, microsecond=0)
        if lowered == "today":
            return today
        if lowered == "yesterday":
            return today - datetime.timedelta(days=1)
        span = _SPAN.match(lowered)
        if span:
            return now - datetime.timedelta(**{_SPAN_UNITS[span.group(2)]: int(span.group(1))})
    if len(value) <= 40:
        try:
            # A date alone first: `parse_datetime` would read it as that day's midnight.
            day = parse_date(value)
            if day is not None:
                start = datetime.datetime.combine(day, datetime.time(), tzinfo=datetime.UTC)
                return start + datetime.timedelta(days=1) if end_of_day else start
            moment = parse_datetime(value)
            if moment is not None:
                aware = moment if moment.tzinfo is not None else moment.replace(tzinfo=datetime.UTC)
                return aware.astimezone(datetime.UTC)
        except (ValueError, OverflowError):
            pass
    accepted = "an ISO 8601 date and time (2026-11-30T08:00:00Z) or a date (2026-11-30)"
    if relative:
        accepted += ', a span back from now ("24h", "90m", "7d", "2w"), "today" or "yesterday"'
    raise FilterError(f"{name} must be {accepted}, not {value[:40]!r}.")


def limit_parse(raw: str | int | None, *, default: int = LIMIT_DEFAULT, maximum: int = LIMIT_MAX) -> int:
    if raw is None or raw == "":
        return default
    text = str(raw)
    if not (text.isascii() and text.isdigit() and len(text) <= 4) or not 1 <= int(text) <= maximum:
        raise FilterError(f"limit must be a whole number from 1 to {maximum}, not {text[:40]!r}.")
    return int(text)


def session_parse(raw: str | None) -> uuid.UUID | None:
    value = (raw or "").strip()
    if not value:
        return None
    try:
        return uuid.UUID(value)
    except ValueError:
        raise FilterError(f"session must be a session id (a UUID), not {value[:40]!r}.") from None


@dataclass(frozen=True)
class ChangePage:
    entries: list[dict[str, Any]]
    # The execution id to pass as `before` for the next (older) page; "" on the last page.
    next_before: str


def changes_page(filters: ChangeFilters) -> ChangePage:
    """The changes the filters select, newest first, a page at a time (keyset on
    (requested_at, id), so rows recorded meanwhile never shift a page). An unknown `before`
    raises `LookupError`."""
    rows = Change.objects.order_by("-requested_at", "-id")
    if filters.target:
        target = filters.target
        rows = rows.filter(target__startswith=target) if target.endswith(":") else rows.filter(target=target)
    if filters.since is not None:
        rows = rows.filter(requested_at__gte=filters.since)
    if filters.until is not None:
        rows = rows.filter(requested_at__lt=filters.until)
    if filters.session_id is not None:
        rows = rows.filter(session_id=filters.session_id)
    if filters.before:
        after = Change.objects.filter(execution_id=filters.before).values("requested_at", "id").first()
        if after is None:
            raise LookupError(filters.before)
        rows = rows.filter(
            Q(requested_at__lt=after["requested_at"]) | Q(requested_at=after["requested_at"], id__lt=after["id"])
        )
    listed = list(rows.select_related("session", "undo_of")[: filters.limit + 1])
    more = len(listed) > filters.limit
    listed = listed[: filters.limit]
    return ChangePage(entries=change_entries(listed), next_before=listed[-1].execution_id if more and listed else "")


def change_entries(changes: list[Change]) -> list[dict[str, Any]]:
    """Each change as the API documents it (`Change` in api/openapi.json)."""
    undone: dict[int, Change] = {}
    for row in Change.objects.filter(undo_of_id__in=[c.pk for c in changes]).order_by("requested_at"):
        undone.setdefault(row.undo_of_id or 0, row)
    proposal_ids = [c.undo_proposal_id for c in changes if c.undo_proposal_id]
    proposals = dict(Proposal.objects.filter(pk__in=proposal_ids).values_list("id", "status"))
    return [_entry(change, undone.get(change.pk), proposals) for change in changes]


def _session(session: AgentSession | None) -> dict[str, Any] | None:
    if session is None:
        return None
    return {"id": str(session.id), "title": session.title, "actor": session.actor}


def _entry(change: Change, undone_by: Change | None, proposals: dict[uuid.UUID, str]) -> dict[str, Any]:
    undo_status = proposals.get(change.undo_proposal_id) if change.undo_proposal_id else None
    return {
        "execution_id": change.execution_id,
        "approval_id": change.approval_id or None,
        "action": change.action,
        "target": change.target,
        "params": change.params,
        "reason": change.reason,
        "risk_class": change.risk_class,
        "session": _session(change.session),
        "turn_id": str(change.correlation_id) if change.correlation_id else None,
        "asked_by": change.asked_by,
        "requested_at": change.requested_at.isoformat(),
        "decided_by": change.decided_by or None,
        "status": change.status,
        "finished_at": change.finished_at.isoformat() if change.finished_at else None,
        "error": change.error or None,
        "followup": change.followup,
        "followup_note": change.followup_note or None,
        "followup_turn_id": str(change.followup_turn_id) if change.followup_turn_id else None,
        "verdict": change.verdict or None,
        "verdict_detail": change.verdict_detail or None,
        "verdict_at": change.verdict_at.isoformat() if change.verdict_at else None,
        "undo": (
            {"proposal_id": str(change.undo_proposal_id), "status": undo_status or "unknown"}
            if change.undo_proposal_id
            else None
        ),
        "undone_by": undone_by.execution_id if undone_by is not None else None,
        "undo_of": change.undo_of.execution_id if change.undo_of is not None else None,
    }
