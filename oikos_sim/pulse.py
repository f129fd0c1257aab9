"""An optional heartbeat that makes the fleet feel alive in demos (``--signal-interval``).

Each tick plays the next step of a short, repeating script of things a homelab does on its own:
an indexer starts timing out and sonarr degrades, postgres's archive failure fires again, a
transcode falls back to software, sonarr recovers. Off by default; tests keep it off.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from oikos_sim.events import EventBus
from oikos_sim.records import Health, Severity
from oikos_sim.world import World

SONARR_REASON = "indexer searches timing out (5 in 10 minutes); a restart usually clears it"


def signal_fire(world: World, events: EventBus, slug: str, kind: str, severity: Severity, summary: str) -> None:
    """Fire (or fire again) a signal and publish `signal.fired`; also the tests' hook for one."""
    signal = world.signal_fire(slug=slug, kind=kind, severity=severity, summary=summary)
    events.publish(
        "signal.fired",
        {
            "signal_id": signal.id,
            "slug": slug,
            "kind": kind,
            "severity": severity,
            "summary": summary,
            "count": signal.count,
        },
    )


def signal_resolve(world: World, events: EventBus, slug: str, kind: str) -> None:
    """Resolve a firing signal and publish `signal.resolved` (nothing when none was firing)."""
    resolved = world.signal_resolve(slug=slug, kind=kind)
    if resolved is not None:
        events.publish("signal.resolved", {"signal_id": resolved.id, "slug": slug, "kind": kind})


def _health(world: World, events: EventBus, slug: str, health: Health, reason: str | None) -> None:
    before, after = world.health_set(slug, health, reason)
    if before != after:
        events.publish("entity.health_changed", {"slug": slug, "from": before, "to": after, "reason": reason})


def _sonarr_degrades(world: World, events: EventBus) -> None:
    signal_fire(
        world,
        events,
        "service:sonarr",
        "http_timeout",
        "warning",
        "indexer search timed out 5 times in 10 minutes",
    )
    with world.lock:
        world.entities["service:sonarr"].attrs["restart_clears"] = True
    _health(world, events, "service:sonarr", "degraded", SONARR_REASON)


def _postgres_archive(world: World, events: EventBus) -> None:
    signal_fire(
        world,
        events,
        "service:postgres",
        "wal_archive_failing",
        "critical",
        "archive_command failing (exit 255): pbs datastore hubris is full",
    )


def _jellyfin_software_fallback(world: World, events: EventBus) -> None:
    signal_fire(
        world,
        events,
        "service:jellyfin",
        "transcode_fallback",
        "info",
        "HEVC transcode fell back to software decoding (renderD128 busy)",
    )


def _sonarr_recovers(world: World, events: EventBus) -> None:
    signal_resolve(world, events, "service:sonarr", "http_timeout")
    with world.lock:
        world.entities["service:sonarr"].attrs.pop("restart_clears", None)
    _health(world, events, "service:sonarr", "healthy", None)


SCRIPT: tuple[Callable[[World, EventBus], None], ...] = (
    _sonarr_degrades,
    _postgres_archive,
    _jellyfin_software_fallback,
    _sonarr_recovers,
)


async def fleet_pulse(world: World, events: EventBus, interval: float) -> None:
    """Play the script forever, one step every ``interval`` seconds (cancel to stop)."""
    step = 0
    while True:
        await asyncio.sleep(interval)
        SCRIPT[step % len(SCRIPT)](world, events)
        step += 1
