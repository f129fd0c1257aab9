"""`manage.py watch`: follow Oikos's event stream and open investigations (watch/watcher.py), and
run the schedules (watch/schedule_runs.py).

Runs until SIGTERM or Ctrl-C; on SIGTERM its running investigation and schedule turns end
`interrupted` (partial answers kept), as in every Hermes process; an interrupted schedule run is
recorded failed. Any number may run: each event and each schedule slot is claimed once, in the database.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from agent import presence
from agent.engine.runner import turns_shutdown
from agent.live import turn_registry_close
from agent.tools.config import MCPConfigError
from agent.tools.hub import tool_hub
from oikos.client import oikos_config
from watch.policy import PolicyFileError, TriggerPolicy
from watch.schedule_runs import Scheduler
from watch.watcher import Watcher

# How long the investigations' escalations get to be stored after their turns were interrupted.
DRAIN_SECONDS = 5.0


class Command(BaseCommand):
    help = "Follow Oikos's event stream and open investigations for the events that call for one; run the schedules."

    def handle(self, *args: Any, **options: Any) -> None:
        if oikos_config() is None:
            raise CommandError("Oikos's REST API is not configured: set OIKOS_API_URL and OIKOS_API_TOKEN.")
        try:
            policy = TriggerPolicy.from_settings()
        except PolicyFileError as exc:
            raise CommandError(str(exc)) from None
        me = presence.presence_start("watch")
        try:
            with contextlib.suppress(KeyboardInterrupt):
                asyncio.run(_watch(policy, me.instance_id))
        finally:
            presence.presence_stop()


async def _watch(policy: TriggerPolicy, instance: Any) -> None:
    try:
        hub = tool_hub()
    except MCPConfigError as exc:
        raise CommandError(str(exc)) from None
    watcher = Watcher(hub=hub, policy=policy, instance=instance)
    watching = asyncio.ensure_future(watcher.run())
    scheduler = Scheduler(hub=hub, instance=instance)
    scheduling = asyncio.ensure_future(scheduler.run())
    terminated = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, terminated.set)
    print("watching Oikos's event stream", flush=True)
    try:
        await terminated.wait()
        watching.cancel()
        scheduling.cancel()
        # Follow-ups stop where they are, still claimed: the next watcher to start runs each again
        # (watch/followups.py `followups_recover`) instead of judging a turn cut off by this stop.
        following = set(watcher.followups)
        for task in following:
            task.cancel()
        await asyncio.gather(*following, return_exceptions=True)
        await turns_shutdown(reason="Hermes's watcher was stopped (SIGTERM) while investigating.")
        # Their escalations are stored as their turns end; one not yet started (a storm gathering)
        # is given up: its investigation stays open with no escalation.
        # A schedule run records its interrupted turn as failed when the turn ends.
        pending = set(watcher.investigations) | set(scheduler.runs)
        if pending:
            _, late = await asyncio.wait(pending, timeout=DRAIN_SECONDS)
            for task in late:
                task.cancel()
            await asyncio.gather(*late, return_exceptions=True)
    finally:
        watching.cancel()
        scheduling.cancel()
        await asyncio.gather(watching, scheduling, return_exceptions=True)
        await turn_registry_close()
        await hub.aclose()
