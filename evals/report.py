"""A run's results as tables per model and per tag: what an engineer compares two models or prompts by.

Pure over result rows (an `EvalResult`, or anything with the same attributes), so the runner's
printed table, the Evals page and the Markdown export show the same numbers. A row counts every
attempt: `cases` is how many results it holds, the pass rate their share that passed, the mean
score their mean (a partial score counts as itself), cost their sum (unknown when no result knew
its price), latency the p50/p95 of their turns' time; `failures` counts each failure code once per
result that has it, most frequent first.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Protocol


class ResultRow(Protocol):
    """What the report reads of a result (`evals.models.EvalResult` has it)."""

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
    """One line of a table: the results of one model, or of one tag."""

    key: str
    cases: int
    passed: int
    pass_rate: float
    mean_score: float
    cost_usd: Decimal | None
    tokens: int
    p50_ms: int
    p95_ms: int
    # (code, count), most frequent first, then by code.
    failures: tuple[tuple[str, int], ...] = ()

    @property
    def failures_text(self) -> str:
        return ", ".join(f"{code} ({count})" for code, count in self.failures) or "—"


@dataclass(frozen=True)
class Report:
    by_model: list[ReportRow] = field(default_factory=list)
    by_tag: list[ReportRow] = field(default_factory=list)
    total: ReportRow | None = None


def report_build(results: Iterable[ResultRow]) -> Report:
    """The tables of `results`: one row per model (in order of first appearance), one per tag (sorted)."""
    rows = list(results)
    if not rows:
        return Report()
    models: dict[str, list[ResultRow]] = {}
    tags: dict[str, list[ResultRow]] = {}
    for row in rows:
        models.setdefault(row.model, []).append(row)
        for tag in dict.fromkeys(row.case_tags or []):
            tags.setdefault(str(tag), []).append(row)
    return Report(
        by_model=[row_build(key, group) for key, group in models.items()],
        by_tag=[row_build(key, tags[key]) for key in sorted(tags)],
        total=row_build("all", rows),
    )


def row_build(key: str, results: Sequence[ResultRow]) -> ReportRow:
    count = len(results)
    passed = sum(1 for result in results if result.passed)
    costs = [result.cost_usd for result in results if result.cost_usd is not None]
    latencies = sorted(int(result.latency_ms) for result in results)
    failures: Counter[str] = Counter()
    for result in results:
        failures.update({str(code) for code in (result.failures or [])})
    return ReportRow(
        key=key,
        cases=count,
        passed=passed,
        pass_rate=passed / count if count else 0.0,
        mean_score=sum(float(result.score) for result in results) / count if count else 0.0,
        cost_usd=sum(costs, Decimal(0)) if costs else None,
        tokens=sum(int(result.tokens) for result in results),
        p50_ms=percentile(latencies, 50),
        p95_ms=percentile(latencies, 95),
        failures=tuple(sorted(failures.items(), key=lambda item: (-item[1], item[0]))),
    )


def percentile(ordered: Sequence[int], percent: float) -> int:
    """The nearest-rank percentile of sorted values (0 for none): p95 of 20 values is the 19th.

    Nearest rank, not interpolation: the number shown is a latency some result really had.
    """
    if not ordered:
        return 0
    rank = max(1, math.ceil(percent / 100 * len(ordered)))
    return int(ordered[rank - 1])
