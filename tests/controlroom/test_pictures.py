"""Pictures in the control room's templates: a chip draws its result only when it can be trusted
to, and an investigation's escalation card draws what depends on its entity (from oikos_sim)."""

from __future__ import annotations

import html
import json

import pytest
from django.template.loader import render_to_string
from django.test import Client

from oikos_sim.graph import blast_radius
from oikos_sim.server import RunningSim
from tests.controlroom.test_investigations import _fire
from transcript.view import ToolItem

POINTS = [["2026-12-06T10:00:00Z", 40.5], ["2026-12-06T10:05:00Z", 41.0], ["2026-12-06T10:10:00Z", 43.25]]
TURN_ID = "7c0e6f2a-0d55-4a43-9a51-3b8f4c1e2d10"
HOSTILE = '<img src=x onerror="alert(1)">'


def _chip(**overrides: object) -> str:
    result = {"slug": "service:postgres", "metric": "disk_pct", "unit": "%", "points": POINTS}
    item = ToolItem(
        tool_use_id="toolu_1",
        name="oikos__query_metrics",
        server="oikos",
        tool="query_metrics",
        input={"slug": "service:postgres", "metric": "disk_pct"},
        done=True,
        result=json.dumps(result),
        state="ok",
    )
    for name, value in overrides.items():
        setattr(item, name, value)
    return render_to_string("controlroom/partials/tool_chip.html", {"item": item, "turn": {"turn_id": TURN_ID}})


class TestToolChip:
    def test_a_metric_result_is_drawn_in_the_chip_with_its_json_folded_under_it(self) -> None:
        chip = _chip()
        assert '<span class="chip-chart"><svg' in chip
        assert 'aria-label="disk_pct on service:postgres, 3 points, last 43.2%"' in chip
        assert chip.index("chip-chart") < chip.index('<details class="chip-raw">') < chip.index("chip-result")

    @pytest.mark.parametrize(
        "overrides",
        [
            {"done": False, "result": ""},  # still running
            {"is_error": True, "state": "error"},
            {"truncated": True},  # a shortened result would draw a misleading line
            {"result": '{"points": [[0, 1]'},
        ],
    )
    def test_a_result_that_cannot_be_drawn_shows_as_json_only(self, overrides: dict[str, object]) -> None:
        chip = _chip(**overrides)
        assert "chip-chart" not in chip and "chip-raw" not in chip

    def test_hostile_text_in_a_result_is_drawn_as_text(self) -> None:
        result = {"slug": HOSTILE, "metric": "disk_pct", "unit": "%", "points": POINTS}
        chip = _chip(result=json.dumps(result))
        assert "<svg" in chip and "<img" not in chip
        assert html.escape(HOSTILE) in chip


@pytest.mark.django_db(transaction=True)
def test_an_investigations_escalation_card_draws_what_depends_on_its_entity(
    client: Client, oikos_settings: RunningSim
) -> None:
    investigation = _fire("service:postgres", "wal_archive_failing", "WAL archiving failing", "critical")

    page = client.get(f"/ui/s/{investigation.session_id}/").content.decode()

    card = page[page.index('id="escalation-card"') :]
    card = card[: card.index("</article>")]
    dependants = blast_radius(oikos_settings.state.world, "service:postgres", 3)
    assert dependants
    assert '<figure class="blast-graph"><svg' in card
    assert f"Blast radius of service:postgres: {len(dependants)} dependants" in card
    for entry in dependants[:12]:
        assert f">{entry['slug']}</text>" in card
