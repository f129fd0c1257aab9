"""A run's results as tables per model and per tag: what an engineer compares two models or prompts by.

Pure over result rows (an `EvalResult`, or anything with the same attributes), so the table
`manage.py eval` prints, the Evals page and the Markdown export show the same numbers.

Pass rate and mean score answer different questions: the pass rate counts the results that cleared
every gate and their case's bar; the mean score shows how close the others came (2 of 3 facts is
0.67, not 0). A result the judge could not score (`judge_error`) is left out of both and counted
apart: the judge's failure says nothing about the model. A tag's row is per tag *and* model: a
tag's pass rate with the models mixed would compare nothing. Latency is per attempt (every turn of
a conversation), p50 and p95 by nearest rank, so a figure shown is one some result really had;
cost is the tested model's list price for its turns (the judge's is not included), unknown when
a result's model has no known price. `failures` counts each code once per result, most frequent
first.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Protocol

from evals.checks import JUDGE_ERROR


class ResultRow(Protocol):
    """What the report reads of a result (`evals.models.EvalResult` has it)."""

    case_id: str
    model: str
    case_tags: Any
    passed: bool
    score: float
    cost_usd: Decimal | None
    latency_ms: int
    tokens: int
    failures: Any


@dataclass(frozen=True)
class ReportRow:
    """One line of a table: the results of one model, of one tag on one model, or of all."""

    key: str
    # Distinct cases, and results (cases times attempts); `scored`: the results the judge could score.
    cases: int
    results: int
    scored: int
    passed: int
    cost_usd: Decimal | None
    tokens: int
    p50_ms: int
    p95_ms: int
    mean: float | None = None
    # (code, count), most frequent first, then by code.
    failures: tuple[tuple[str, int], ...] = ()

    @property
    def pass_rate(self) -> float | None:
        return self.passed / self.scored if self.scored else None

    @property
    def mean_score(self) -> float | None:
        return self.mean

    @property
    def unscored(self) -> int:
        return self.results - self.scored

    @property
    def failures_text(self) -> str:
        return ", ".join(f"{code} ({count})" for code, count in self.failures) or "—"


@dataclass(frozen=True)
class Report:
    by_model: list[ReportRow] = field(default_factory=list)
    by_tag: list[ReportRow] = field(default_factory=list)
    total: ReportRow | None = None


def report_build(results: Iterable[ResultRow]) -> Report:
    """The tables of `results`: one row per model (in order of first appearance), one per tag and
    model (sorted), and the total."""
    rows = list(results)
    if not rows:
        return Report()
    models: dict[str, list[ResultRow]] = {}
    tags: dict[str, list[ResultRow]] = {}
    for row in rows:
        models.setdefault(row.model, []).append(row)
        for tag in dict.fromkeys(row.case_tags or ["(untagged)"]):
            tags.setdefault(f"{tag} · {row.model}", []).append(row)
    return Report(
        by_model=[row_build(key, group) for key, group in models.items()],
        by_tag=[row_build(key, tags[key]) for key in sorted(tags)],
        total=row_build("all", rows),
    )


def row_build(key: str, results: Sequence[ResultRow]) -> ReportRow:
    scored = [result for result in results if JUDGE_ERROR not in (result.failures or [])]
    costs = [result.cost_usd for result in results]
    latencies = sorted(int(result.latency_ms) for result in results)
    failures: Counter[str] = Counter()
    for result in results:
        failures.update({str(code) for code in (result.failures or [])})
    return ReportRow(
        key=key,
        cases=len({result.case_id for result in results}),
        results=len(results),
        scored=len(scored),
        passed=sum(1 for result in scored if result.passed),
        mean=sum(float(result.score) for result in scored) / len(scored) if scored else None,
        cost_usd=None if any(cost is None for cost in costs) else sum((c for c in costs if c is not None), Decimal(0)),
        tokens=sum(int(result.tokens) for result in results),
        p50_ms=percentile(latencies, 50),
        p95_ms=percentile(latencies, 95),
        failures=tuple(sorted(failures.items(), key=lambda item: (-item[1], item[0]))),
    )


def percentile(ordered: Sequence[int], percent: float) -> int:
    """The nearest-rank percentile of sorted values (0 for none): p95 of 20 values is the 19th."""
    if not ordered:
        return 0
    rank = max(1, math.ceil(percent / 100 * len(ordered)))
    return int(ordered[rank - 1])


# --- the printed tables (`manage.py eval`) ---------------------------------------------------------

HEADER = ("", "cases", "runs", "pass rate", "mean score", "cost USD", "p50 s", "p95 s", "failures by reason")


def _cells(row: ReportRow) -> tuple[str, ...]:
    rate, mean = row.pass_rate, row.mean_score
    return (
        row.key,
        str(row.cases),
        str(row.results),
        "-" if rate is None else f"{rate:.0%} ({row.passed}/{row.scored})",
        "-" if mean is None else f"{mean:.2f}",
        "-" if row.cost_usd is None else f"{row.cost_usd:.4f}",
        f"{row.p50_ms / 1000:.1f}",
        f"{row.p95_ms / 1000:.1f}",
        ", ".join(f"{code} {count}" for code, count in row.failures)
        + (f" ({row.unscored} not scored)" if row.unscored else ""),
    )


def table_text(title: str, rows: list[ReportRow]) -> str:
    """A plain-text table (columns aligned) with a title line."""
    lines = [HEADER, *(_cells(row) for row in rows)]
    widths = [max(len(line[column]) for line in lines) for column in range(len(HEADER))]
    out = [title]
    for index, line in enumerate(lines):
        out.append("  ".join(cell.ljust(widths[column]) for column, cell in enumerate(line)).rstrip())
        if index == 0:
            out.append("  ".join("-" * width for width in widths))
    return "\n".join(out)


def report_text(results: Iterable[ResultRow]) -> str:
    """The tables `manage.py eval` prints at the end: per model, then per tag and model."""
    report = report_build(results)
    if report.total is None:
        return "No results."
    return table_text("By model", report.by_model) + "\n\n" + table_text("By tag", report.by_tag)
