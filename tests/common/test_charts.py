"""Pictures of tool results (`common.charts`, `common.dependency_graph`): drawn from the simulator's
real answers, every text escaped, and None (the chip shows the JSON) for anything odd."""

from __future__ import annotations

import json
import math
import xml.etree.ElementTree as ElementTree
from typing import Any

import pytest

from common.charts import SPARK_POINTS, SPARKS, chart_for_result, sparkline_for_result
from common.dependency_graph import NODES_SHOWN, blast_graph
from oikos_sim.clock import minute_floor, utc_now
from oikos_sim.graph import blast_radius
from oikos_sim.metrics import metric_series, metric_trend
from oikos_sim.seed.homelab import world_seed
from oikos_sim.world import World

SVG = "{http://www.w3.org/2000/svg}"
# What a picture may contain: drawing elements and text, nothing that runs or links.
DRAWING = {"svg", "title", "g", "path", "polyline", "line", "rect", "circle", "text"}
HOSTILE = "<script>alert('x')</script>\" onload=\"alert(1)"


@pytest.fixture(scope="module")
def world() -> World:
    return world_seed(minute_floor(utc_now()))


def parsed(picture: str | None) -> ElementTree.Element:
    """The picture as XML (so it is well formed), checked to hold only drawing elements."""
    assert picture is not None
    root = ElementTree.fromstring(picture)
    tags = {element.tag.removeprefix(SVG) for element in root.iter()}
    assert tags <= DRAWING, f"unexpected elements: {tags - DRAWING}"
    for element in root.iter():
        assert not any(name.lower().startswith("on") for name in element.attrib), element.attrib
    return root


def tenths(value: float) -> str:
    """How a value between 10 and 100 is written: one decimal, none when it is zero."""
    return f"{value:.1f}".rstrip("0").rstrip(".")


def texts(root: ElementTree.Element) -> list[str]:
    return ["".join(element.itertext()) for element in root.iter(f"{SVG}text")]


class TestMetricChart:
    def test_a_query_metrics_answer_is_a_line_chart_named_for_what_it_shows(self, world: World) -> None:
        series = metric_series(world, "service:postgres", "disk_pct", since_minutes=120)
        root = parsed(chart_for_result("oikos__query_metrics", json.dumps(series)))

        last = series["points"][-1][1]
        assert root.get("role") == "img"
        label = root.get("aria-label") or ""
        assert label.startswith(f"disk_pct on service:postgres, {len(series['points'])} points, last ")
        assert label.endswith("%")
        assert root.findtext(f"{SVG}title") == label
        shown = texts(root)
        assert "disk_pct on service:postgres" in shown
        assert f"last {tenths(last)}%" in shown
        # Axis labels: the lowest and highest sample, and the window's ends in UTC.
        values = [point[1] for point in series["points"]]
        assert f"{tenths(max(values))}%" in shown and f"{tenths(min(values))}%" in shown
        assert any(text.endswith(" UTC") for text in shown)
        (line,) = root.iter(f"{SVG}polyline")
        assert len(line.get("points", "").split()) == len(series["points"])

    def test_several_series_are_drawn_each_with_its_name(self) -> None:
        result = {
            "metric": "cpu_pct",
            "unit": "%",
            "series": [
                {"slug": "host:pve1", "points": [[1_780_000_000, 10], [1_780_000_300, 20]]},
                {"slug": "host:pve2", "points": [[1_780_000_000, 30], [1_780_000_300, 45.5]]},
            ],
        }
        root = parsed(chart_for_result("query_metrics", result))
        assert len(list(root.iter(f"{SVG}polyline"))) == 2 + 2  # two lines, and their legend keys
        assert {"host:pve1", "host:pve2"} <= set(texts(root))
        assert "host:pve2 last 45.5%" in (root.get("aria-label") or "")

    def test_a_trend_is_a_band_from_min_to_max_with_first_and_last(self, world: World) -> None:
        trend = metric_trend(world, "service:postgres", "disk_pct", window_hours=24)
        root = parsed(chart_for_result("get_trend", json.dumps(trend)))
        label = root.get("aria-label") or ""
        assert label.startswith(f"disk_pct on service:postgres over 24 h: {trend['direction']}")
        assert f"last {tenths(trend['last'])}%" in label
        assert len(list(root.iter(f"{SVG}rect"))) == 1

    def test_hostile_text_in_a_result_comes_out_as_text(self) -> None:
        result = {"slug": HOSTILE, "metric": HOSTILE, "unit": '"><script>', "points": [[0, 1], [1, 2], [2, 3]]}
        picture = chart_for_result("query_metrics", result)
        assert picture is not None and "<script" not in picture
        root = parsed(picture)
        # The hostile words are there, as words (cut to the heading's length).
        assert HOSTILE[:40] in (root.get("aria-label") or "")
        assert any(HOSTILE[:40] in text for text in texts(root))

    @pytest.mark.parametrize(
        "result",
        [
            "not json",
            '{"points": [[0, 1], [1, ',  # cut short
            [],
            {"slug": "service:x"},
            {"points": []},
            {"points": [["2026-12-06T10:00:00Z", 5]]},  # one point is not a line
            {"points": "1,2,3"},
            {"points": [[0, "high"], [1, None], [2, True]]},
            {"points": [[0, math.nan], [1, math.inf]]},
            {"series": [{"name": "a", "points": [[0, 1]]}]},
            {"first": 1, "last": 2},  # a trend without its range
            {"first": 1, "last": 2, "min": 5, "max": 3},
        ],
    )
    def test_odd_data_draws_nothing(self, result: Any) -> None:
        assert chart_for_result("query_metrics", result) is None
        assert chart_for_result("get_trend", result) is None

    def test_a_flat_series_and_unreadable_points_among_good_ones_still_draw(self) -> None:
        root = parsed(chart_for_result("query_metrics", {"metric": "load1", "points": [[0, 2], "x", [1, 2], [2, 2]]}))
        assert (root.get("aria-label") or "") == "load1, 3 points, last 2"

    def test_tools_it_does_not_know_are_left_to_the_json(self) -> None:
        assert chart_for_result("oikos__get_entity", {"points": [[0, 1], [1, 2]]}) is None


class TestBlastGraph:
    def test_the_simulators_blast_radius_is_a_tree_under_its_target(self, world: World) -> None:
        entries = blast_radius(world, "service:postgres", 3)
        answer = {"slug": "service:postgres", "depth": 3, "count": len(entries), "entries": entries}
        root = parsed(chart_for_result("oikos__get_blast_radius", json.dumps(answer)))

        shown = texts(root)
        assert shown[0] == "service:postgres"
        for entry in entries[:NODES_SHOWN]:
            assert entry["slug"] in shown
        direct = sum(1 for entry in entries if entry["depth"] == 1)
        assert (root.get("aria-label") or "").startswith(
            f"Blast radius of service:postgres: {len(entries)} dependants ({direct} direct)"
        )
        # A node's colour says its health, and the legend names the states shown.
        health = {entry["health"] for entry in entries[:NODES_SHOWN]}
        assert health <= set(shown)

    def test_a_dependant_hangs_under_what_it_depends_on(self) -> None:
        entries = [
            {"slug": "service:authentik", "depth": 1, "via": "service:authentik depends_on service:postgres"},
            {
                "slug": "service:grafana",
                "depth": 2,
                "via": "service:grafana depends_on service:authentik depends_on service:postgres",
                "health": "down",
            },
        ]
        root = parsed(blast_graph(target="service:postgres", entries=entries))
        circles = {
            circle.get("cx") for circle in root.iter(f"{SVG}circle") if "graph-node" in (circle.get("class") or "")
        }
        # Indented one step per depth.
        assert len(circles) == 2
        assert "1 down" in (root.get("aria-label") or "")

    def test_many_dependants_end_in_a_count_of_the_rest(self) -> None:
        entries = [{"slug": f"service:s{n:02}", "depth": 1, "health": "healthy"} for n in range(NODES_SHOWN + 5)]
        root = parsed(blast_graph(target="host:pve1", entries=entries))
        shown = texts(root)
        assert "+5 more" in shown
        assert "service:s00" in shown and f"service:s{NODES_SHOWN + 4:02}" not in shown

    def test_hostile_slugs_come_out_as_text(self) -> None:
        entries = [{"slug": HOSTILE, "depth": 1, "via": f"{HOSTILE} depends_on x", "health": "<b>"}]
        picture = blast_graph(target='"><script>alert(1)</script>', entries=entries)
        assert picture is not None and "<script" not in picture and "<b>" not in picture
        root = parsed(picture)
        assert '"><script>alert(1)</script>' in texts(root)[0]

    @pytest.mark.parametrize(
        ("target", "entries"),
        [("service:x", []), ("", [{"slug": "a"}]), ("service:x", "abc"), ("service:x", [{"depth": 1}, 3, None])],
    )
    def test_nothing_to_draw_is_none(self, target: str, entries: Any) -> None:
        assert blast_graph(target=target, entries=entries) is None


class TestSparkline:
    def test_a_metric_series_is_one_line_of_bars_from_its_low_to_its_high(self, world: World) -> None:
        series = metric_series(world, "service:postgres", "disk_pct", since_minutes=120)

        spark = sparkline_for_result("oikos__query_metrics", json.dumps(series))

        assert spark is not None
        values = [value for _, value in series["points"]]
        assert set(spark.bars) <= set(SPARKS) and 2 <= len(spark.bars) <= SPARK_POINTS
        assert "▁" in spark.bars and "█" in spark.bars
        assert spark.summary.startswith(f"disk_pct on service:postgres, {len(values)} points, min ")

    def test_a_rising_series_reads_left_to_right(self) -> None:
        spark = sparkline_for_result("get_trend", {"metric": "load1", "points": [[0, 1], [1, 2], [2, 3], [3, 4]]})

        assert spark is not None and spark.bars == "▁▃▆█"

    @pytest.mark.parametrize(
        ("tool", "result"),
        [("get_health", {"points": [[0, 1], [1, 2]]}), ("query_metrics", {"points": [[0, 1]]}), ("query_metrics", "x")],
    )
    def test_anything_else_draws_no_line(self, tool: str, result: Any) -> None:
        assert sparkline_for_result(tool, result) is None
