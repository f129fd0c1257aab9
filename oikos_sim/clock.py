"""Wall-clock helpers shared by the world, the executions and the event stream."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta


def utc_now() -> datetime:
    return datetime.now(UTC)


def iso(moment: datetime) -> str:
    """ISO 8601 in UTC with a ``Z`` suffix, to the millisecond (what every payload carries)."""
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def minute_floor(moment: datetime) -> datetime:
    return moment.replace(second=0, microsecond=0)


def ago(anchor: datetime, *, days: float = 0, hours: float = 0, minutes: float = 0) -> datetime:
    return anchor - timedelta(days=days, hours=hours, minutes=minutes)
