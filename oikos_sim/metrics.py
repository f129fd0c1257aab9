"""Metric time series: a daily rhythm, deterministic noise and the incident's ramps.

A sample is a pure function of (entity, metric, time), so repeated queries agree and the same
world start always tells the same story: postgres's disk and pg_wal climbing since WAL archiving
began failing, pbs's datastore nearly full, pve3 running warm in the evening.
"""

from __future__ import annotations

import math
import random
import zlib
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from oikos_sim.clock import iso, utc_now
from oikos_sim.errors import InvalidRequest
from oikos_sim.records import Entity
from oikos_sim.world import World

STEP = timedelta(minutes=5)
MAX_POINTS = 500


@dataclass(frozen=True)
class MetricSpec:
    name: str
    unit: str
    base: float
    daily: float = 0.0
    noise: float = 0.0
    ceiling: float | None = None
    # A ramp from ``ramp_from`` to ``base`` over the ``ramp_hours`` before the world's anchor.
    ramp_from: float | None = None
    ramp_hours: float = 0.0
    ramp_from_incident: bool = False


def _common(entity: Entity) -> list[MetricSpec]:
    disk = entity.disk_pct if entity.disk_pct is not None else 30.0
    if entity.type == "host":
        return [
            MetricSpec("cpu_pct", "%", 18, 10, 3, 100),
            MetricSpec("mem_pct", "%", 58, 4, 1, 100),
            MetricSpec("load1", "", 1.6, 1.0, 0.3),
            MetricSpec("cpu_temp_c", "°C", 52, 9, 2),
            MetricSpec("disk_pct", "%", disk, 0, 0.05, 100),
        ]
    if entity.type in ("lxc", "vm"):
        return [
            MetricSpec("cpu_pct", "%", 6, 4, 1.5, 100),
            MetricSpec("mem_pct", "%", 46, 6, 1.5, 100),
            MetricSpec("disk_pct", "%", disk, 0, 0.05, 100),
            MetricSpec("net_rx_mbps", "Mbit/s", 2.0, 3.0, 0.6),
            MetricSpec("net_tx_mbps", "Mbit/s", 1.4, 2.0, 0.4),
        ]
    return [
        MetricSpec("latency_ms", "ms", 35, 15, 4),
        MetricSpec("requests_per_min", "req/min", 40, 35, 6),
        MetricSpec("error_rate_pct", "%", 0.2, 0.1, 0.05, 100),
    ]


_OVERRIDES: dict[str, list[MetricSpec]] = {
    "service:postgres": [
        MetricSpec("latency_ms", "ms", 9, 3, 1),
        MetricSpec("connections", "", 64, 20, 4, 200),
        MetricSpec("wal_size_gib", "GiB", 17.9, 0, 0.05, ramp_from=1.0, ramp_from_incident=True),
        MetricSpec("disk_pct", "%", 91.1, 0, 0.05, 100, ramp_from=63.2, ramp_from_incident=True),
    ],
    "lxc:postgres": [MetricSpec("disk_pct", "%", 91.1, 0, 0.05, 100, ramp_from=63.2, ramp_from_incident=True)],
    "service:pbs": [MetricSpec("datastore_pct", "%", 97.1, 0, 0.05, 100, ramp_from=88.0, ramp_hours=14)],
    "service:jellyfin": [
        MetricSpec("active_streams", "", 1.2, 1.8, 0.4),
        MetricSpec("transcode_sessions", "", 0.5, 1.2, 0.3),
    ],
    "service:caddy": [MetricSpec("requests_per_min", "req/min", 600, 400, 40)],
    "service:redis": [MetricSpec("latency_ms", "ms", 0.4, 0.1, 0.05)],
    "host:pve3": [MetricSpec("cpu_temp_c", "°C", 60, 16, 2)],
}


def metric_specs(entity: Entity) -> dict[str, MetricSpec]:
    specs = {spec.name: spec for spec in _common(entity)}
    specs.update({spec.name: spec for spec in _OVERRIDES.get(entity.slug, [])})
    return specs


def _spec_for(world: World, slug: str, metric: str) -> MetricSpec:
    specs = metric_specs(world.entity_get(slug))
    if metric not in specs:
        raise InvalidRequest(f"{slug} has no metric {metric!r}; available: {', '.join(sorted(specs))}.")
    return specs[metric]


def _sample(world: World, slug: str, spec: MetricSpec, moment: datetime) -> float:
    index = int(moment.timestamp() // STEP.total_seconds())
    value = spec.base
    ramp_start = world.incident_since if spec.ramp_from_incident else world.anchor - timedelta(hours=spec.ramp_hours)
    if spec.ramp_from is not None and moment < world.anchor:
        span = (world.anchor - ramp_start).total_seconds()
        progress = 0.0 if moment <= ramp_start else (moment - ramp_start).total_seconds() / span
        value = spec.ramp_from + (spec.base - spec.ramp_from) * progress
    hour = moment.hour + moment.minute / 60
    value += spec.daily * math.sin(2 * math.pi * (hour - 14) / 24)
    value += random.Random(zlib.crc32(f"{slug}|{spec.name}|{index}".encode())).gauss(0, spec.noise)
    value = max(0.0, value)
    if spec.ceiling is not None:
        value = min(spec.ceiling, value)
    return round(value, 2)


def metric_series(world: World, slug: str, metric: str, *, since_minutes: int, step_minutes: int = 5) -> dict[str, Any]:
    """Samples of ``metric`` for ``slug`` over the last ``since_minutes``, oldest first."""
    spec = _spec_for(world, slug, metric)
    if step_minutes < 5 or step_minutes % 5:
        raise InvalidRequest("step_minutes must be a multiple of 5 (the scrape interval).")
    if since_minutes // step_minutes > MAX_POINTS:
        raise InvalidRequest(
            f"{since_minutes} minutes at a {step_minutes}-minute step is more than {MAX_POINTS} points; "
            "raise step_minutes or shorten the window."
        )
    end = _aligned(utc_now())
    start = end - timedelta(minutes=since_minutes)
    points = []
    moment = start + timedelta(minutes=step_minutes)
    while moment <= end:
        points.append([iso(moment), _sample(world, slug, spec, moment)])
        moment += timedelta(minutes=step_minutes)
    return {"slug": slug, "metric": metric, "unit": spec.unit, "step_minutes": step_minutes, "points": points}


def metric_trend(world: World, slug: str, metric: str, *, window_hours: int) -> dict[str, Any]:
    """Summary statistics and a least-squares slope for ``metric`` over the window."""
    spec = _spec_for(world, slug, metric)
    end = _aligned(utc_now())
    steps = int(timedelta(hours=window_hours) / STEP)
    values = [_sample(world, slug, spec, end - STEP * (steps - i)) for i in range(1, steps + 1)]
    hours = [i * STEP.total_seconds() / 3600 for i in range(len(values))]
    mean_y = sum(values) / len(values)
    slope = _slope(hours, values)
    # The whole-window slope hides a change of pace; the projection uses the recent one.
    recent = max(int(len(values) / 4), int(timedelta(hours=1) / STEP))
    recent_slope = _slope(hours[-recent:], values[-recent:])
    spread = max(values) - min(values)
    direction = (
        "flat"
        if abs(slope * window_hours) < max(0.05 * spread, 0.02 * abs(mean_y), 1e-9)
        else ("rising" if slope > 0 else "falling")
    )
    trend: dict[str, Any] = {
        "slug": slug,
        "metric": metric,
        "unit": spec.unit,
        "window_hours": window_hours,
        "first": values[0],
        "last": values[-1],
        "min": min(values),
        "max": max(values),
        "mean": round(mean_y, 2),
        "change": round(values[-1] - values[0], 2),
        "slope_per_hour": round(slope, 3),
        "recent_slope_per_hour": round(recent_slope, 3),
        "direction": direction,
    }
    if spec.unit == "%" and direction == "rising" and recent_slope > 0:
        trend["hours_to_100_pct"] = round((100 - values[-1]) / recent_slope, 1)
    return trend


def _slope(xs: list[float], ys: list[float]) -> float:
    """Least-squares slope of ys over xs."""
    mean_x, mean_y = sum(xs) / len(xs), sum(ys) / len(ys)
    variance = sum((x - mean_x) ** 2 for x in xs) or 1.0
    return sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True)) / variance


def _aligned(moment: datetime) -> datetime:
    seconds = STEP.total_seconds()
    return datetime.fromtimestamp(moment.timestamp() // seconds * seconds, tz=moment.tzinfo)


def metric_latest(world: World, slug: str, metric: str) -> float:
    """The most recent sample (what a probe would read right now)."""
    return _sample(world, slug, _spec_for(world, slug, metric), _aligned(utc_now()))
