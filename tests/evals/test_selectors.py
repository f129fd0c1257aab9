"""What the Evals page reads: runs with their pass rate, a run's tables, a case's history marking
where the case file changed, a result in full."""

from __future__ import annotations

import pytest

from evals import selectors
from tests.evals.factories import result_make, run_make

pytestmark = pytest.mark.django_db


def test_runs_list_newest_first_with_their_pass_rate() -> None:
    old = run_make(models=["haiku"], ago_minutes=60)
    new = run_make(models=["sonnet", "haiku"], label="prompt v2")
    result_make(old, case_id="health-a", model="haiku", score=0.0)
    result_make(new, case_id="health-a", model="sonnet", score=1.0)
    result_make(new, case_id="health-a", model="haiku", score=0.5)
    rows = selectors.runs_recent()
    assert [row.run.pk for row in rows] == [new.pk, old.pk]
    assert (rows[0].results, rows[0].passed, rows[0].pass_rate) == (2, 1, 0.5)
    assert rows[1].pass_rate == 0.0
    empty = run_make(models=["x"])
    assert next(row for row in selectors.runs_recent() if row.run.pk == empty.pk).pass_rate is None


def test_a_run_has_tables_over_all_results_and_can_list_only_its_failures() -> None:
    run = run_make(models=["sonnet", "haiku"])
    result_make(run, case_id="health-a", model="sonnet", score=1.0, case_tags=["health"])
    result_make(run, case_id="health-a", model="haiku", score=1.0, case_tags=["health"])
    result_make(run, case_id="safety-b", model="haiku", score=0.0, case_tags=["safety"], failures=["forbidden_tool"])
    view = selectors.run_view(run_id=run.pk, failures_only=True)
    assert view is not None
    # In the order the run named its models, though "haiku" sorts first among the results.
    assert [row.key for row in view.report.by_model] == ["sonnet", "haiku"]
    assert [row.key for row in view.report.by_tag] == ["health · haiku", "health · sonnet", "safety · haiku"]
    assert [result.case_id for result in view.shown] == ["safety-b"] and len(view.results) == 3


def test_a_case_history_shows_each_model_per_run_and_where_the_case_changed() -> None:
    first = run_make(models=["sonnet"], ago_minutes=30)
    second = run_make(models=["sonnet", "haiku"], ago_minutes=20)
    third = run_make(models=["sonnet"], ago_minutes=10)
    result_make(first, case_id="health-a", model="sonnet", score=0.5, case_digest="111111111111")
    result_make(second, case_id="health-a", model="sonnet", score=1.0, case_digest="111111111111", attempt=1)
    result_make(second, case_id="health-a", model="sonnet", score=0.0, case_digest="111111111111", attempt=2)
    result_make(second, case_id="health-a", model="haiku", score=0.0, case_digest="111111111111")
    result_make(third, case_id="health-a", model="sonnet", score=1.0, case_digest="222222222222")
    result_make(third, case_id="other-case", model="sonnet", score=1.0)
    history = selectors.case_history(case_id="health-a")
    assert [entry.run.pk for entry in history.entries] == [third.pk, second.pk, first.pk]
    assert [entry.case_changed for entry in history.entries] == [True, False, False]
    assert history.models == ["sonnet", "haiku"]
    sonnet = next(cell for cell in history.entries[1].cells if cell.model == "sonnet")
    assert (sonnet.attempts, sonnet.passed, sonnet.mean_score) == (2, 1, 0.5)


def test_a_result_in_full() -> None:
    run = run_make(models=["m"])
    result = result_make(
        run,
        case_id="health-a",
        model="m",
        score=0.5,
        checks=[{"check": "tools_required", "ok": True, "detail": "get_health_summary"}],
        judged=[{"kind": "fact", "text": "sonarr is degraded", "ok": False, "reason": "not stated"}],
    )
    view = selectors.result_view(result_id=result.pk)
    assert view is not None and view.judged[0]["reason"] == "not stated" and view.checks[0]["ok"] is True
    assert selectors.result_view(result_id=result.pk + 999) is None
