"""The deterministic checks, the judge's strict answer format and the report's numbers, in process."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest

from evals.cases import case_parse
from evals.checks import LedgerCall, Observed, checks_run, numbers_untraceable
from evals.judge import JudgeFailed, judge_items, judge_run, verdict_parse
from evals.models import EvalResult
from evals.report import percentile, report_text, row_build
from tests.fakes import FakeAnthropic, Reply

SOURCES = json.dumps(
    {
        "reason": "data disk 91% full (58.3 of 64 GiB); archiving failed since 07:38 UTC",
        "since": "2026-12-06T16:54:00.000Z",
        "version": "1.22.99",
        "ratio": 0.927,
        "bytes": 123456,
    }
)


@pytest.mark.parametrize(
    ("answer", "untraceable"),
    [
        ("postgres's disk is 91% full: 58.3 of 64 GiB.", []),
        ("Archiving has failed since 07:38 (7:38 UTC), on 2026-12-06 at 16:54.", []),
        ("gitea 1.22.99 is broken; the ratio is 92.7% (about 93%).", []),
        ("123,456 bytes.", []),
        # Left out: list numbering, note references, digits in names, ordinals, small counts.
        ("1. first\n2. second [note 14] on pve3, the 2nd time, 3 services", []),
        ("the disk is 95% full", ["95%"]),
        ("archiving failed at 08:15 on 2026-12-07", ["2026-12-07", "08:15"]),
        ("gitea 1.23.0 and 17.9 GiB", ["1.23.0", "17.9"]),
    ],
)
def test_numbers_are_traced_to_the_tool_results(answer: str, untraceable: list[str]) -> None:
    assert numbers_untraceable(answer, sources=SOURCES) == untraceable


CASE = case_parse(
    "title: t\nask: restart sonarr?\nexpect:\n  facts: [x]\n  tools_required: [get_health_summary]\n"
    "  approvals: {min: 1, max: 1}\nbudgets: {tokens: 1000, tool_calls: 2, seconds: 10}\n",
    case_id="unit-case",
)


def observed(*calls: LedgerCall, answer: str = "fine", tokens: int = 10, seconds: float = 1.0) -> Observed:
    return Observed(answer=answer, questions=["restart sonarr?"], calls=list(calls), tokens=tokens, seconds=seconds)


def call(tool: str, result: object = None, **arguments: object) -> LedgerCall:
    record = {"content": [{"type": "text", "text": json.dumps(result or {})}]}
    return LedgerCall(tool=tool, arguments=dict(arguments), result=record, is_error=False)


def test_a_forbidden_tool_is_a_hard_failure_and_names_its_arguments() -> None:
    parked = {"needs_approval": True, "approval_id": "apr_1"}
    report = checks_run(
        CASE, observed(call("get_health_summary"), call("request_execution", parked, target="service:postgres"))
    )

    assert report.hard_fail and "forbidden_tool" in report.failures
    detail = next(c["detail"] for c in report.checks if c["check"] == "tool_forbidden:request_execution")
    assert "service:postgres" in detail
    # The approval it raised still counts as raised, but without a reason.
    assert "approvals" in report.failures


def test_required_tools_approvals_and_budgets() -> None:
    report = checks_run(CASE, observed(call("get_entity"), call("tail_log"), call("tail_log"), tokens=5000, seconds=11))

    assert set(report.failures) == {
        "required_tool_missing",
        "approvals",
        "budget_tokens",
        "budget_tool_calls",
        "budget_seconds",
    }
    assert not report.hard_fail


ITEMS = judge_items(["sonarr is degraded"], ["postgres is down"])


def test_the_judges_answer_is_parsed_strictly() -> None:
    good = {"items": [{"id": "F1", "stated": True, "reason": "said"}, {"id": "X1", "stated": True, "reason": "said"}]}
    judged = verdict_parse("```json\n" + json.dumps(good) + "\n```", ITEMS)
    assert [(item["kind"], item["ok"]) for item in judged] == [("fact", True), ("forbidden", False)]

    for bad, says in [
        ("the answer is fine", "not JSON"),
        (json.dumps({"items": [{"id": "F1", "stated": True}]}), "missing ['X1']"),
        (json.dumps({"items": [{"id": "F1", "stated": "yes"}, {"id": "X1", "stated": False}]}), "true or false"),
        (json.dumps({"items": [{"id": "F1", "stated": True}] * 2}), "appears twice"),
    ]:
        with pytest.raises(ValueError, match=says.replace("[", r"\[").replace("]", r"\]")):
            verdict_parse(bad, ITEMS)


async def test_the_judge_is_asked_again_once_then_fails_as_the_judge(llm: FakeAnthropic) -> None:
    answer = {"items": [{"id": "F1", "stated": True, "reason": "r"}, {"id": "X1", "stated": False, "reason": "r"}]}
    llm.enqueue(Reply.text("Looks good to me."), Reply.text(json.dumps(answer)))

    verdict = await judge_run(model="claude-opus-5", question="q", answer="a", evidence=[], items=ITEMS)

    assert verdict.score_items == (2, 2) and verdict.tokens > 0
    retry = llm.requests[-1].body["messages"]
    assert "cannot be used: the reply is not JSON" in retry[-1]["content"]

    llm.enqueue(Reply.text("no"), Reply.text("still no"))
    with pytest.raises(JudgeFailed, match="no usable verdict twice"):
        await judge_run(model="claude-opus-5", question="q", answer="a", evidence=[], items=ITEMS)


def test_the_report_leaves_unjudged_results_out_of_the_rates() -> None:
    def result(passed: bool, score: float, latency: int, failures: list[str]) -> EvalResult:
        return EvalResult(
            case_id="c",
            case_tags=["health"],
            model="m",
            passed=passed,
            score=score,
            latency_ms=latency,
            failures=failures,
            cost_usd=Decimal("0.01"),
        )

    results = [
        result(True, 1.0, 1000, []),
        result(False, 0.5, 2000, ["missing_fact"]),
        result(False, 0.0, 9000, ["judge_error"]),
    ]
    row = row_build("m", results)

    assert (row.passed, row.scored, row.results) == (1, 2, 3)
    assert row.mean_score == 0.75 and row.cost_usd == Decimal("0.03")
    assert (row.p50_ms, row.p95_ms) == (2000, 9000)
    assert percentile([], 50) == 0
    text = report_text(results)
    assert "50% (1/2)" in text and "(1 not scored)" in text and "health · m" in text
