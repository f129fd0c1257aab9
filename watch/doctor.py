"""`doctor`'s watcher row: is a `manage.py watch` running, and how late does it claim Oikos's events?"""

from __future__ import annotations

from channels.db import database_sync_to_async
from django.conf import settings

from agent.doctor.checks import CheckResult, Status, exception_text
from watch.selectors import watch_status


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
