"""The fleet health strip: counts by health and the entities that are not healthy, worst first."""

from __future__ import annotations

from typing import Any

from oikos_sim.clock import iso, utc_now
from oikos_sim.world import World

_SEVERITY = {"down": 0, "degraded": 1, "healthy": 2}
_TYPE_ORDER = {"service": 0, "lxc": 1, "vm": 2, "host": 3}


def health_summary(world: World) -> dict[str, Any]:
    """``{"status": "ok", "fleet": ..., "counts": {...}, "degraded": [{slug, health, reason, ...}]}``.

    ``status`` is the API's own status; ``fleet`` is the worst health in the homelab.
    """
    with world.lock:
        entities = list(world.entities.values())
        open_signals = sum(1 for signal in world.signals if signal.state == "firing")
    counts = {"healthy": 0, "degraded": 0, "down": 0}
    for entity in entities:
        counts[entity.health] += 1
    unhealthy = sorted(
        (e for e in entities if e.health != "healthy"),
        key=lambda e: (_SEVERITY[e.health], _TYPE_ORDER[e.type], e.slug),
    )
    fleet = "down" if counts["down"] else "degraded" if counts["degraded"] else "healthy"
    return {
        "status": "ok",
        "fleet": fleet,
        "counts": counts,
        "degraded": [
            {
                "slug": e.slug,
                "type": e.type,
                "health": e.health,
                "reason": e.health_reason,
                "since": iso(e.updated_at),
            }
            for e in unhealthy
        ],
        "entities": len(entities),
        "open_signals": open_signals,
        "checked_at": iso(utc_now()),
    }
