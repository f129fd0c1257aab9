"""What the frontends read of eval runs: the list of runs, a run's tables and results, a case's
history across runs, and one result in full (the Evals page, its Markdown export)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from django.db.models import Count, Q, QuerySet

from evals.models import EvalResult, EvalRun
from evals.report import Report, report_build

RUNS_SHOWN = 100
HISTORY_RUNS_SHOWN = 50


@dataclass(frozen=True)
class RunRow:
    """A run in the list: when, on what, by whom, and how it went overall."""

    run: EvalRun
    results: int
    passed: int

    @property
    def pass_rate(self) -> float | None:
        return self.passed / self.results if self.results else None


def runs_recent(*, limit: int = RUNS_SHOWN) -> list[RunRow]:
    runs = EvalRun.objects.annotate(
        result_count=Count("results"), passed_count=Count("results", filter=Q(results__passed=True))
    ).order_by("-started_at")[:limit]
    return [RunRow(run=run, results=run.result_count, passed=run.passed_count) for run in runs]


@dataclass(frozen=True)
class RunView:
    run: EvalRun
    report: Report
    results: list[EvalResult]
    # Results shown: all of them, or only those that failed.
    failures_only: bool = False
    shown: list[EvalResult] = field(default_factory=list)


def run_view(*, run_id: uuid.UUID, failures_only: bool = False) -> RunView | None:
    """A run with its tables (over every result) and its results, failed ones only if asked."""
    run = EvalRun.objects.filter(pk=run_id).first()
    if run is None:
        return None
    results = list(_results().filter(run=run))
    shown = [result for result in results if not result.passed] if failures_only else results
    report = report_build(results)
    # Models in the order the run named them (`--model a --model b`), not the order their results sort in.
    named = {name: index for index, name in enumerate(run.model_names or [])}
    by_model = sorted(report.by_model, key=lambda row: named.get(row.key, len(named)))
    report = Report(by_model=by_model, by_tag=report.by_tag, total=report.total)
    return RunView(run=run, report=report, results=results, failures_only=failures_only, shown=shown)


def _results() -> QuerySet[EvalResult]:
    # The list never shows a whole answer or the checks: leave the large columns for the detail.
    return EvalResult.objects.order_by("case_id", "model", "attempt", "id")


@dataclass(frozen=True)
class HistoryCell:
    """One model's results for the case in one run (its attempts taken together)."""

    model: str
    attempts: int
    passed: int
    mean_score: float
    # The first result, to open.
    result_id: int


@dataclass(frozen=True)
class HistoryEntry:
    run: EvalRun
    case_digest: str
    # The case file changed since the run before this one (read oldest to newest): scores on
    # either side of the mark are of different cases.
    case_changed: bool
    cells: list[HistoryCell]


@dataclass(frozen=True)
class CaseHistory:
    case_id: str
    entries: list[HistoryEntry]
    models: list[str]


def case_history(*, case_id: str, limit: int = HISTORY_RUNS_SHOWN) -> CaseHistory:
    """The case's score and pass per model in each run that ran it, newest run first, with where its file changed."""
    run_ids = list(
        EvalResult.objects.filter(case_id=case_id).values_list("run_id", flat=True).order_by("run_id").distinct()
    )
    runs = list(EvalRun.objects.filter(pk__in=run_ids).order_by("-started_at")[:limit])
    rows: dict[uuid.UUID, list[EvalResult]] = {}
    for result in EvalResult.objects.filter(case_id=case_id, run__in=runs).order_by("model", "attempt", "id"):
        rows.setdefault(result.run_id, []).append(result)
    entries: list[HistoryEntry] = []
    previous = ""
    for run in reversed(runs):
        results = rows.get(run.pk, [])
        digest = next((result.case_digest for result in results if result.case_digest), "")
        changed = bool(previous and digest and digest != previous)
        previous = digest or previous
        entries.append(HistoryEntry(run=run, case_digest=digest, case_changed=changed, cells=_cells(results)))
    entries.reverse()
    models = list(dict.fromkeys(cell.model for entry in entries for cell in entry.cells))
    return CaseHistory(case_id=case_id, entries=entries, models=models)


def _cells(results: list[EvalResult]) -> list[HistoryCell]:
    by_model: dict[str, list[EvalResult]] = {}
    for result in results:
        by_model.setdefault(result.model, []).append(result)
    return [
        HistoryCell(
            model=model,
            attempts=len(group),
            passed=sum(1 for result in group if result.passed),
            mean_score=sum(result.score for result in group) / len(group),
            result_id=group[0].pk,
        )
        for model, group in by_model.items()
    ]


@dataclass(frozen=True)
class ResultView:
    """One result in full: its checks, judged items, failures and answer, and where its turn is."""

    result: EvalResult
    checks: list[dict[str, Any]]
    judged: list[dict[str, Any]]
    session_id: uuid.UUID | None
    turn_id: uuid.UUID | None


def result_view(*, result_id: int, run_id: uuid.UUID | None = None) -> ResultView | None:
    found = EvalResult.objects.select_related("run").filter(pk=result_id)
    if run_id is not None:
        found = found.filter(run_id=run_id)
    result = found.first()
    if result is None:
        return None
    return ResultView(
        result=result,
        checks=[item for item in (result.checks or []) if isinstance(item, dict)],
        judged=[item for item in (result.judged or []) if isinstance(item, dict)],
        session_id=result.session_id,
        turn_id=result.turn_id,
    )
