"""`doctor`'s watcher rows: is a `manage.py watch` running, how late does it claim Oikos's events,
and how do the schedules it runs stand?"""

from __future__ import annotations

import zoneinfo

from channels.db import database_sync_to_async
from django.conf import settings

from agent.doctor.checks import CheckResult, Status, exception_text
from watch.models import ScheduleRun
from watch.selectors import ScheduleRow, WatchStatus, schedules_listed, watch_status


async def watcher_check(seconds: float) -> CheckResult:
    """Is a `manage.py watch` running, when did it last claim an event, and how late was it?"""
    if not (getattr(settings, "OIKOS_API_URL", "") or getattr(settings, "OIKOS_MCP_URL", "")):
        return CheckResult("watcher", Status.SKIP, "Oikos is not configured: there is no event stream to watch")
    try:
        status = await database_sync_to_async(watch_status)()
    except Exception as exc:
        return CheckResult("watcher", Status.FAIL, f"cannot read the watcher's state: {exception_text(exc)}")
    if not status.watchers and not status.ever_ran:
        return CheckResult(
            "watcher", Status.SKIP, "no `manage.py watch` has run: Oikos's signals open no investigation"
        )
    if not status.watchers:
        return CheckResult(
            "watcher",
            Status.WARN,
            "no `manage.py watch` is running now (one ran before): signals open no investigation",
        )
    if status.last_claimed_at is None:
        return CheckResult("watcher", Status.OK, f"{status.watchers} running; no event seen yet")
    lag = f", claimed {status.lag_seconds:.1f} s after Oikos raised it" if status.lag_seconds is not None else ""
    numbering = f" (Oikos numbered its events anew: epoch {status.epoch})" if status.epoch > 1 else ""
    detail = (
        f"{status.watchers} running; {status.events} events claimed, the last #{status.last_event_id}{numbering} "
        f"at {status.last_claimed_at:%Y-%m-%d %H:%M:%S}{lag}"
    )
    return CheckResult("watcher", Status.OK, detail)


async def schedules_check(seconds: float) -> CheckResult:
    """Each schedule's next and last run and skipped slots; a warning when one's last run failed, or
    when schedules are enabled and no `manage.py watch` runs them."""
    try:
        rows, status = await database_sync_to_async(_schedules_read)()
    except Exception as exc:
        return CheckResult("schedules", Status.FAIL, f"cannot read the schedules: {exception_text(exc)}")
    if not rows:
        return CheckResult("schedules", Status.SKIP, "none (manage.py schedule add --cron '0 7 * * *' --digest)")
    detail = "; ".join(_schedule_line(row) for row in rows)
    enabled = [row for row in rows if row.schedule.enabled]
    failed = [row for row in enabled if row.last_run and row.last_run.state == ScheduleRun.State.FAILED]
    if enabled and not status.watchers:
        return CheckResult(
            "schedules", Status.WARN, f"no `manage.py watch` is running: {len(enabled)} enabled never run — {detail}"
        )
    if failed:
        names = ", ".join(f"#{row.schedule.pk} {row.schedule.name}" for row in failed)
        return CheckResult("schedules", Status.WARN, f"the last run of {names} failed — {detail}")
    return CheckResult("schedules", Status.OK, detail)


def _schedules_read() -> tuple[list[ScheduleRow], WatchStatus]:
    return schedules_listed(), watch_status()


def _schedule_line(row: ScheduleRow) -> str:
    schedule = row.schedule
    upcoming = (
        f"next {row.next_slot.astimezone(zoneinfo.ZoneInfo(schedule.timezone)):%Y-%m-%d %H:%M %Z}"
        if row.next_slot
        else "disabled"
    )
    last = "never ran"
    if row.last_run is not None:
        said = f" ({row.last_said[:60]})" if row.last_said else ""
        last = f"last {row.last_run.slot:%Y-%m-%d %H:%M} UTC {row.last_run.state}{said}"
    skipped = f", {row.skipped} skipped" if row.skipped else ""
    return f"#{schedule.pk} {schedule.name}: {upcoming}, {last}{skipped}"
