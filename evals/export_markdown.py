"""A run as a Markdown note: its tables per model and per tag, then every result with why it failed.

What a person pastes into a pull request comparing two models or two prompts. Everything that
comes from outside Hermes (answers, judge reasons, check details, case ids, labels) goes through
`transcript.export_escape`, as the session note does, so no answer can change the note's
structure or carry live HTML.
"""

from __future__ import annotations

from decimal import Decimal

from evals.report import ReportRow
from evals.selectors import RunView
from transcript.export_escape import code_span, inline, quoted

ANSWER_CHARS = 1500


def run_markdown(view: RunView) -> str:
    run = view.run
    title = f"Eval run {run.started_at:%Y-%m-%d %H:%M} UTC" + (f" — {run.label}" if run.label else "")
    lines = [f"# {inline(title)}", ""]
    lines += [
        f"- **Run:** {code_span(str(run.pk))} · **Status:** {inline(run.status)}",
        f"- **Models:** {', '.join(inline(model) for model in run.model_names) or '—'}"
        + (f" · **Judge:** {inline(run.judge_model)}" if run.judge_model else ""),
        f"- **By:** {inline(run.by or '—')} · **Version:** {inline(run.version or '—')} · **Repeat:** {run.repeat}",
    ]
    if run.tags or run.case_ids:
        lines.append(
            f"- **Cases:** tags {', '.join(inline(tag) for tag in run.tags) or 'any'};"
            f" ids {', '.join(inline(case) for case in run.case_ids) or 'any'}"
        )
    lines += ["", "## Per model", "", *_table(view.report.by_model, "model")]
    lines += ["", "## Per tag", "", *_table(view.report.by_tag, "tag")]
    lines += ["", "## Results", ""]
    for result in view.results:
        verdict = "pass" if result.passed else "FAIL"
        lines.append(
            f"### {inline(result.case_id)} · {inline(result.model)} · attempt {result.attempt}: {verdict}"
            f" ({result.score:.2f})"
        )
        lines.append("")
        if result.failures:
            lines.append(f"- **Failures:** {', '.join(inline(str(code)) for code in result.failures)}")
        for check in result.checks or []:
            if isinstance(check, dict) and not check.get("ok"):
                lines.append(
                    f"- **Check {inline(str(check.get('check', '')))}:** {inline(str(check.get('detail', '')))}"
                )
        for item in result.judged or []:
            if isinstance(item, dict):
                mark = "✓" if item.get("ok") else "✗"
                lines.append(
                    f"- {mark} {inline(str(item.get('kind', '')))}: {inline(str(item.get('text', '')))}"
                    + (f" — {inline(str(item.get('reason', '')))}" if item.get("reason") else "")
                )
        if result.error:
            lines.append(f"- **Error:** {inline(result.error)}")
        if result.turn_id:
            lines.append(f"- **Turn:** {code_span(str(result.turn_id))}")
        if result.answer.strip():
            answer = result.answer.strip()
            if len(answer) > ANSWER_CHARS:
                answer = answer[:ANSWER_CHARS] + " …"
            lines += ["", quoted(answer)]
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def _table(rows: list[ReportRow], name: str) -> list[str]:
    if not rows:
        return ["No results."]
    lines = [
        f"| {name} | cases | pass rate | mean score | cost | p50 | p95 | failures |",
        "|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for row in rows:
        failures = ", ".join(f"{inline(code)} ({count})" for code, count in row.failures) or "—"
        lines.append(
            f"| {_cell(row.key)} | {row.cases} | {_share(row.pass_rate)} | {_score(row.mean_score)}"
            f" | {_cost(row.cost_usd)}"
            f" | {row.p50_ms / 1000:.1f} s | {row.p95_ms / 1000:.1f} s | {failures} |"
        )
    return lines


def _cell(text: str) -> str:
    # A table cell: `inline` escapes `|` too, so a name cannot end the cell.
    return inline(text)


def _share(value: float | None) -> str:
    return "—" if value is None else f"{value:.0%}"


def _score(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}"


def _cost(cost: Decimal | None) -> str:
    return "—" if cost is None else f"${cost:.4f}"
