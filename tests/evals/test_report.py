"""The tables per model and per tag: partial scores, p50/p95 latency and failures by reason."""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal

from evals.report import percentile, report_build


@dataclass
class Row:
    model: str
    passed: bool
    score: float
    latency_ms: int = 1000
    case_tags: list[str] = field(default_factory=list)
    cost_usd: Decimal | None = None
    tokens: int = 0
    failures: list[str] = field(default_factory=list)
    case_id: str = ""

    def __post_init__(self) -> None:
        # Each row its own case unless a test says otherwise.
        self.case_id = self.case_id or f"case-{id(self)}"


def test_a_partial_score_counts_as_itself_in_the_mean_but_not_as_a_pass() -> None:
    report = report_build(
        [
            Row("sonnet", True, 1.0, cost_usd=Decimal("0.10"), tokens=100),
            Row("sonnet", False, 0.5, failures=["missing_fact"], cost_usd=Decimal("0.05"), tokens=50),
            Row("haiku", False, 0.0, failures=["forbidden_tool", "missing_fact"]),
        ]
    )
    sonnet, haiku = report.by_model
    assert (sonnet.key, sonnet.cases, sonnet.passed, sonnet.pass_rate, sonnet.mean_score) == ("sonnet", 2, 1, 0.5, 0.75)
    assert sonnet.cost_usd == Decimal("0.15") and sonnet.tokens == 150
    assert haiku.cost_usd is None, "no result knew its price: unknown, not $0"
    assert report.total is not None and report.total.results == 3


def test_failures_are_counted_by_reason_once_per_result_most_frequent_first() -> None:
    report = report_build(
        [
            Row("m", False, 0.3, failures=["missing_fact", "missing_fact", "budget_tokens"]),
            Row("m", False, 0.0, failures=["missing_fact"]),
            Row("m", False, 0.0, failures=["forbidden_claim"]),
        ]
    )
    row = report.by_model[0]
    assert row.failures == (("missing_fact", 2), ("budget_tokens", 1), ("forbidden_claim", 1))
    assert row.failures_text == "missing_fact (2), budget_tokens (1), forbidden_claim (1)"


def test_latency_percentiles_are_latencies_some_result_had() -> None:
    latencies = list(range(1000, 21000, 1000))  # 20 results: 1 s .. 20 s
    report = report_build([Row("m", True, 1.0, latency_ms=value) for value in reversed(latencies)])
    assert (report.by_model[0].p50_ms, report.by_model[0].p95_ms) == (10_000, 19_000)
    assert percentile([], 95) == 0 and percentile([7], 50) == 7 and percentile([1, 2, 3], 95) == 3


def test_a_result_counts_in_every_tag_of_its_case_and_tags_are_sorted() -> None:
    report = report_build(
        [
            Row("m", True, 1.0, case_tags=["safety", "health"]),
            Row("m", False, 0.0, case_tags=["health"]),
        ]
    )
    assert [(row.key, row.results, row.passed) for row in report.by_tag] == [("health · m", 2, 1), ("safety · m", 1, 1)]


def test_a_result_the_judge_could_not_score_counts_in_neither_the_pass_rate_nor_the_mean() -> None:
    report = report_build(
        [
            Row("m", True, 1.0, case_id="a"),
            Row("m", False, 0.0, failures=["judge_error"], case_id="a"),
            Row("m", False, 0.5, failures=["missing_fact"], case_id="b"),
        ]
    )
    row = report.by_model[0]
    assert (row.cases, row.results, row.scored, row.passed) == (2, 3, 2, 1)
    assert (row.pass_rate, row.mean_score, row.unscored) == (0.5, 0.75, 1)
    assert report_build([Row("m", False, 0.0, failures=["judge_error"])]).by_model[0].pass_rate is None


def test_no_results_make_empty_tables() -> None:
    report = report_build([])
    assert report.by_model == [] and report.by_tag == [] and report.total is None
