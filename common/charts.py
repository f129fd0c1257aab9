"""Pictures of tool results: metric series as line charts, trends as a band, blast radius as a tree.

Data in, SVG string out: no Django, no I/O, so every frontend (the control room's chips, the
Markdown export) draws the same picture. `chart_for_result` is the one entry point: given a tool's
name and its result (the JSON text a tool returned, or the parsed object), it returns the SVG, or
None when the result is not one it knows how to draw (or is odd: too few numbers, not JSON, cut
short) — the caller then shows the raw JSON as before.

Every piece of text (slugs, metric names, units) is the tool's, so untrusted: it is written only
through `common.svg`, which escapes it. Colours are `currentColor` and classes the stylesheet can
restyle (`static/controlroom/controlroom.css`), so a chart follows the page's dark or light theme.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from common import svg
from common.dependency_graph import blast_graph

WIDTH = 320.0
HEIGHT = 132.0
# The plot's box inside the picture: room for the heading above, value labels left, times below.
PLOT_LEFT, PLOT_RIGHT, PLOT_TOP, PLOT_BOTTOM = 46.0, 312.0, 22.0, 112.0
SERIES_SHOWN = 4
# Fallback strokes (an export read outside the control room); the stylesheet sets its own.
SERIES_STROKE = ("currentColor", "#5fb3ff", "#d29922", "#b69cff")
SERIES_DASH = (None, "5 3", "2 3", "8 3 2 3")


@dataclass(frozen=True)
class Series:
    name: str
    # (x, y): x is seconds since the epoch when the samples carry times, else the sample's index.
    points: list[tuple[float, float]]
    timed: bool


def chart_for_result(tool_name: str, result: Any) -> str | None:
    """The picture of a tool's result, or None (then show the JSON).

    `tool_name` may carry its server (`oikos__query_metrics`); `result` is the tool's JSON text or
    the object it parses to.
    """
    tool = str(tool_name).rsplit("__", 1)[-1]
    data = _parsed(result)
    if not isinstance(data, Mapping):
        return None
    if tool == "query_metrics":
        return metric_chart(data)
    if tool == "get_trend":
        return metric_chart(data) if "points" in data or "series" in data else trend_chart(data)
    if tool == "get_blast_radius":
        return blast_graph(target=str(data.get("slug") or ""), entries=data.get("entries") or [])
    return None


# Eight heights of a text sparkline: a metric drawn where only text goes (the Markdown export,
# which carries no HTML or image of its own; tests/transcript/test_export_safety.py).
SPARKS = "▁▂▃▄▅▆▇█"
SPARK_POINTS = 48


@dataclass(frozen=True)
class Sparkline:
    bars: str  # only SPARKS characters
    summary: str  # the tool's names and unit in it: untrusted text, for the caller to escape


def sparkline_for_result(tool_name: str, result: Any) -> Sparkline | None:
    """The metric series of a `query_metrics` / `get_trend` result as one line of block
    characters (its first series, resampled to at most `SPARK_POINTS`), or None."""
    tool = str(tool_name).rsplit("__", 1)[-1]
    data = _parsed(result)
    if tool not in ("query_metrics", "get_trend") or not isinstance(data, Mapping):
        return None
    metric = _word(data.get("metric")) or "value"
    series = _series_of(data, default_name=metric)
    if not series:
        return None
    values = [y for _, y in series[0].points]
    if len(values) > SPARK_POINTS:
        step = len(values) / SPARK_POINTS
        values = [values[int(index * step)] for index in range(SPARK_POINTS - 1)] + [values[-1]]
    low, high = min(values), max(values)
    span = (high - low) or 1.0
    bars = "".join(SPARKS[round((value - low) / span * (len(SPARKS) - 1))] for value in values)
    unit = _word(data.get("unit"))
    slug = _word(data.get("slug"))
    where = f" on {slug}" if slug else ""
    name = f"{metric}{where}" if len(series) == 1 else f"{series[0].name}{where}"
    summary = (
        f"{name}, {len(series[0].points)} points, min {_value(low, unit)}, max {_value(high, unit)},"
        f" last {_value(series[0].points[-1][1], unit)}"
    )
    return Sparkline(bars=bars, summary=summary)


def _parsed(result: Any) -> Any:
    if isinstance(result, str | bytes):
        try:
            return json.loads(result)
        except ValueError:
            return None
    return result


def metric_chart(data: Mapping[str, Any]) -> str | None:
    """A line chart of `{slug, metric, unit, points: [[time, value], …]}`, or of
    `{series: [{name|metric|slug, points}, …]}`; None when fewer than two points can be read."""
    unit = _word(data.get("unit"))
    metric = _word(data.get("metric")) or "value"
    slug = _word(data.get("slug"))
    series = _series_of(data, default_name=metric)
    if not series:
        return None
    xs = [x for line in series for x, _ in line.points]
    ys = [y for line in series for _, y in line.points]
    low, high = min(ys), max(ys)
    if high == low:
        low, high = low - 1, high + 1
    first_x, last_x = min(xs), max(xs)
    span_x = (last_x - first_x) or 1.0

    def place(x: float, y: float) -> tuple[float, float]:
        return (
            PLOT_LEFT + (x - first_x) / span_x * (PLOT_RIGHT - PLOT_LEFT),
            PLOT_BOTTOM - (y - low) / (high - low) * (PLOT_BOTTOM - PLOT_TOP),
        )

    parts = [_frame(), _value_labels(low, high, unit)]
    for index, line in enumerate(series):
        placed = [place(x, y) for x, y in line.points]
        parts.append(_polyline(placed, index))
        last_x_at, last_y_at = placed[-1]
        parts.append(
            svg.element(
                "circle", cx=last_x_at, cy=last_y_at, r=2.5, class_=f"chart-last chart-s{index}", fill="currentColor"
            )
        )
    parts.append(_time_labels(series[0].timed, first_x, last_x))
    where = f" on {slug}" if slug else ""
    last = series[0].points[-1][1]
    heading = f"{metric}{where}"
    if len(series) == 1:
        count = len(series[0].points)
        summary = f"{heading}, {count} points, last {_value(last, unit)}"
        parts.append(_heading(heading, f"last {_value(last, unit)}"))
    else:
        lasts = "; ".join(f"{line.name} last {_value(line.points[-1][1], unit)}" for line in series)
        summary = f"{heading}, {len(series)} series: {lasts}"
        parts.append(_heading(heading, f"{len(series)} series"))
        parts.append(_series_legend(series))
    return svg.document(
        *parts, width=WIDTH, height=HEIGHT + (14 if len(series) > 1 else 0), css="hermes-chart", summary=summary
    )


def trend_chart(data: Mapping[str, Any]) -> str | None:
    """A trend without samples (`get_trend`): the min-max band, the mean, and first → last."""
    first, last = svg.finite(data.get("first")), svg.finite(data.get("last"))
    low, high = svg.finite(data.get("min")), svg.finite(data.get("max"))
    if first is None or last is None or low is None or high is None or low > high:
        return None
    mean = svg.finite(data.get("mean"))
    unit = _word(data.get("unit"))
    metric = _word(data.get("metric")) or "value"
    slug = _word(data.get("slug"))
    hours = svg.finite(data.get("window_hours"))
    direction = _word(data.get("direction"))
    bottom, top = min(low, first, last), max(high, first, last)
    if top == bottom:
        bottom, top = bottom - 1, top + 1

    def y_of(value: float) -> float:
        return PLOT_BOTTOM - (value - bottom) / (top - bottom) * (PLOT_BOTTOM - PLOT_TOP)

    band = svg.element(
        "rect",
        x=PLOT_LEFT,
        y=y_of(high),
        width=PLOT_RIGHT - PLOT_LEFT,
        height=max(1.0, y_of(low) - y_of(high)),
        class_="chart-band",
        fill="currentColor",
        fill_opacity="0.12",
    )
    parts = [_frame(), band, _value_labels(low, high, unit, y_low=y_of(low), y_high=y_of(high))]
    if mean is not None:
        parts.append(
            svg.element(
                "line",
                x1=PLOT_LEFT,
                x2=PLOT_RIGHT,
                y1=y_of(mean),
                y2=y_of(mean),
                class_="chart-mean",
                stroke="currentColor",
                stroke_opacity="0.5",
                stroke_dasharray="3 3",
            )
        )
    parts.append(_polyline([(PLOT_LEFT, y_of(first)), (PLOT_RIGHT, y_of(last))], 0))
    parts.append(
        svg.element("circle", cx=PLOT_RIGHT, cy=y_of(last), r=2.5, class_="chart-last chart-s0", fill="currentColor")
    )
    window = f"{svg.number(hours)} h" if hours is not None else "the window"
    parts.append(
        svg.label(f"{window} ago" if hours is not None else "start", x=PLOT_LEFT, y=HEIGHT - 6, css="chart-axis")
    )
    parts.append(svg.label("now", x=PLOT_RIGHT, y=HEIGHT - 6, css="chart-axis", anchor="end"))
    heading = f"{metric} on {slug}" if slug else metric
    parts.append(_heading(heading, f"{direction + ', ' if direction else ''}last {_value(last, unit)}"))
    summary = (
        f"{heading} over {window}: {direction or 'trend'}, first {_value(first, unit)}, last {_value(last, unit)}, "
        f"range {_value(low, unit)} to {_value(high, unit)}"
    )
    return svg.document(*parts, width=WIDTH, height=HEIGHT, css="hermes-chart", summary=summary)


def _word(value: object) -> str:
    return value.strip()[:80] if isinstance(value, str) else ""


def _series_of(data: Mapping[str, Any], *, default_name: str) -> list[Series]:
    raw: list[tuple[str, Any]] = []
    if isinstance(data.get("series"), Sequence) and not isinstance(data.get("series"), str):
        for index, entry in enumerate(data["series"]):
            if isinstance(entry, Mapping):
                name = next(
                    (_word(entry.get(k)) for k in ("name", "label", "metric", "slug") if _word(entry.get(k))), ""
                )
                raw.append((name or f"series {index + 1}", entry.get("points")))
    elif "points" in data:
        raw.append((default_name, data.get("points")))
    series = [line for name, points in raw[:SERIES_SHOWN] if (line := _read_series(name, points)) is not None]
    # Samples with times and samples without cannot share one axis: keep those like the first.
    return [line for line in series if line.timed == series[0].timed] if series else []


def _read_series(name: str, points: Any) -> Series | None:
    if not isinstance(points, Sequence) or isinstance(points, str):
        return None
    valued = [(moment, value, index) for index, (moment, value) in enumerate(map(_point, points)) if value is not None]
    if len(valued) < 2:
        return None
    # Times when every sample has one (sorted: a series may arrive newest first), else the order.
    timed = all(moment is not None for moment, _, _ in valued)
    if timed:
        cleaned = sorted((float(moment or 0), value) for moment, value, _ in valued)
    else:
        cleaned = [(float(index), value) for _, value, index in valued]
    return Series(name=name, points=cleaned, timed=timed)


def _point(point: Any) -> tuple[float | None, float | None]:
    """(seconds since the epoch or None, value or None) of `[time, value]`, `{time|t|at, value|v}`
    or a bare number."""
    if isinstance(point, Mapping):
        moment = next((point[k] for k in ("time", "timestamp", "t", "at", "ts") if k in point), None)
        value = next((point[k] for k in ("value", "v", "y") if k in point), None)
    elif isinstance(point, Sequence) and not isinstance(point, str) and len(point) == 2:
        moment, value = point
    else:
        moment, value = None, point
    return _seconds(moment), svg.finite(value)


def _seconds(moment: object) -> float | None:
    if isinstance(moment, str):
        try:
            parsed = datetime.datetime.fromisoformat(moment.replace("Z", "+00:00"))
        except ValueError:
            return None
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=datetime.UTC)
        return parsed.timestamp()
    number = svg.finite(moment)
    # Epoch seconds (or milliseconds) from this century; small numbers are indexes, not times.
    if number is None or number < 1e9:
        return None
    return number / 1000 if number > 1e11 else number


def _value(value: float, unit: str) -> str:
    magnitude = abs(value)
    shown = f"{value:.0f}" if magnitude >= 100 else f"{value:.1f}" if magnitude >= 10 else f"{value:.2f}"
    if "." in shown:
        shown = shown.rstrip("0").rstrip(".")
    if not unit:
        return shown
    return f"{shown}{unit}" if unit in ("%", "°C", "°F") else f"{shown} {unit}"


def _frame() -> str:
    return svg.element(
        "path",
        d=f"M{svg.number(PLOT_LEFT)} {svg.number(PLOT_TOP)}V{svg.number(PLOT_BOTTOM)}H{svg.number(PLOT_RIGHT)}",
        class_="chart-frame",
        fill="none",
        stroke="currentColor",
        stroke_opacity="0.3",
    )


def _value_labels(low: float, high: float, unit: str, *, y_low: float = PLOT_BOTTOM, y_high: float = PLOT_TOP) -> str:
    return svg.element(
        "g",
        svg.label(_value(high, unit), x=PLOT_LEFT - 4, y=y_high + 4, css="chart-axis", anchor="end"),
        svg.label(_value(low, unit), x=PLOT_LEFT - 4, y=y_low + 3, css="chart-axis", anchor="end"),
        fill="currentColor",
        class_="chart-values",
    )


def _time_labels(timed: bool, first: float, last: float) -> str:
    if timed:
        start, end = (datetime.datetime.fromtimestamp(x, tz=datetime.UTC) for x in (first, last))
        pattern = "%H:%M" if last - first <= 86400 else "%d %b %H:%M"
        left, right = start.strftime(pattern), end.strftime(pattern) + " UTC"
    else:
        left, right = "first", "last"
    return svg.element(
        "g",
        svg.label(left, x=PLOT_LEFT, y=HEIGHT - 6, css="chart-axis"),
        svg.label(right, x=PLOT_RIGHT, y=HEIGHT - 6, css="chart-axis", anchor="end"),
        fill="currentColor",
        class_="chart-times",
    )


def _heading(title: str, aside: str) -> str:
    return svg.element(
        "g",
        svg.label(title, x=4, y=13, css="chart-title"),
        svg.label(aside, x=PLOT_RIGHT, y=13, css="chart-aside", anchor="end"),
        fill="currentColor",
    )


def _polyline(points: list[tuple[float, float]], index: int) -> str:
    return svg.element(
        "polyline",
        points=" ".join(f"{svg.number(x)},{svg.number(y)}" for x, y in points),
        class_=f"chart-line chart-s{index}",
        fill="none",
        stroke=SERIES_STROKE[index % len(SERIES_STROKE)],
        stroke_width="1.6",
        stroke_dasharray=SERIES_DASH[index % len(SERIES_DASH)],
        stroke_linejoin="round",
    )


def _series_legend(series: list[Series]) -> str:
    parts = []
    x = 4.0
    for index, line in enumerate(series):
        y = HEIGHT + 8
        parts.append(_polyline([(x, y - 4), (x + 14, y - 4)], index))
        name = line.name if len(line.name) <= 20 else line.name[:19] + "…"
        parts.append(svg.label(name, x=x + 18, y=y, css="chart-legend-label"))
        x += 18 + min(len(line.name), 20) * 6.4 + 12
    return svg.element("g", *parts, fill="currentColor", class_="chart-legend")
