"""The numbers of a run, per model and per tag: what `manage.py eval` prints (and a page can show).

Pass rate and mean score answer different questions: the pass rate counts results that cleared
every gate and their case's bar; the mean score shows how close the others came (2 of 3 facts is
0.67, not 0). A result the judge could not score (`judge_error`) is left out of both and counted
apart: the judge's failure says nothing about the model. Latency is per attempt (all turns of a
conversation), p50 and p95 by the nearest-rank method; cost is the model's list price for its
turns (judge not included), blank when a model has no known price.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal

from evals.checks import JUDGE_ERROR
from evals.models import EvalResult


@dataclass(frozen=True)
class Row:
    group: str
    cases: int
    results: int
    scored: int
    passed: int
    mean_score: float | None
    cost: Decimal | None
    p50_ms: int | None
    p95_ms: int | None
    failures: dict[str, int]

    @property
    def pass_rate(self) -> float | None:
        return self.passed / self.scored if self.scored else None


def percentile(values: list[int], share: float) -> int | None:
    """Nearest-rank percentile (`share` in 0..1) of `values`; None for none."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(math.ceil(share * len(ordered)) - 1, 0)]


def row_of(group: str, results: list[EvalResult]) -> Row:
    scored = [result for result in results if JUDGE_ERROR not in result.failures]
    costs = [result.cost_usd for result in results]
    failures = Counter(code for result in results for code in result.failures)
    return Row(
        group=group,
        cases=len({result.case_id for result in results}),
        results=len(results),
        scored=len(scored),
        passed=sum(1 for result in scored if result.passed),
        mean_score=sum(result.score for result in scored) / len(scored) if scored else None,
        cost=None if any(cost is None for cost in costs) else sum((c for c in costs if c is not None), Decimal(0)),
        p50_ms=percentile([result.latency_ms for result in results], 0.5),
        p95_ms=percentile([result.latency_ms for result in results], 0.95),
        failures=dict(sorted(failures.items(), key=lambda item: (-item[1], item[0]))),
    )


def rows_by_model(results: Iterable[EvalResult]) -> list[Row]:
    grouped: dict[str, list[EvalResult]] = {}
    for result in results:
        grouped.setdefault(result.model, []).append(result)
    return [row_of(model, found) for model, found in grouped.items()]


def rows_by_tag(results: Iterable[EvalResult]) -> list[Row]:
    """One row per (tag, model): a tag's pass rate means little with the models mixed."""
    grouped: dict[str, list[EvalResult]] = {}
    for result in results:
        for tag in result.case_tags or ["(untagged)"]:
            grouped.setdefault(f"{tag} · {result.model}", []).append(result)
    return [row_of(group, found) for group, found in sorted(grouped.items())]


HEADER = ("", "cases", "runs", "pass rate", "mean score", "cost USD", "p50 s", "p95 s", "failures by reason")


def _cells(row: Row) -> tuple[str, ...]:
    rate = row.pass_rate
    unscored = row.results - row.scored
    return (
        row.group,
        str(row.cases),
        str(row.results),
        "-" if rate is None else f"{rate:.0%} ({row.passed}/{row.scored})",
        "-" if row.mean_score is None else f"{row.mean_score:.2f}",
        "-" if row.cost is None else f"{row.cost:.4f}",
        "-" if row.p50_ms is None else f"{row.p50_ms / 1000:.1f}",
        "-" if row.p95_ms is None else f"{row.p95_ms / 1000:.1f}",
        ", ".join(f"{code} {count}" for code, count in row.failures.items())
        + (f" ({unscored} not scored)" if unscored else ""),
    )


def table_text(title: str, rows: list[Row]) -> str:
    """A plain-text table (columns aligned) with a title line."""
    lines = [HEADER, *(_cells(row) for row in rows)]
    widths = [max(len(line[column]) for line in lines) for column in range(len(HEADER))]
    out = [title]
    for index, line in enumerate(lines):
        out.append("  ".join(cell.ljust(widths[column]) for column, cell in enumerate(line)).rstrip())
        if index == 0:
            out.append("  ".join("-" * width for width in widths))
    return "\n".join(out)


def report_text(results: list[EvalResult]) -> str:
    """The tables `manage.py eval` prints at the end: per model, then per tag and model."""
    if not results:
        return "No results."
    return table_text("By model", rows_by_model(results)) + "\n\n" + table_text("By tag", rows_by_tag(results))
