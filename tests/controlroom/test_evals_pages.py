"""The Evals pages: runs, a run's tables and results, a case's history, a result with its transcript,
and the run as Markdown; answers and judge reasons are text, never HTML."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.test import Client

from tests.evals.factories import result_make, run_make, session_answered
from transcript.export_escape import note_safe

pytestmark = pytest.mark.django_db

HOSTILE = '<img src=x onerror="alert(1)"> [click](javascript:alert(1)) <script>alert(2)</script>'


def test_the_evals_page_lists_runs_with_their_pass_rate_and_is_in_the_nav(client: Client) -> None:
    run = run_make(models=["claude-sonnet-5", "claude-haiku-4-5"], label="prompt v2")
    result_make(run, case_id="health-a", model="claude-sonnet-5", score=1.0)
    result_make(run, case_id="health-a", model="claude-haiku-4-5", score=0.5, failures=["missing_fact"])
    html = client.get("/ui/evals/").content.decode()
    assert 'href="/ui/evals/" aria-current="page">Evals</a>' in html
    assert "prompt v2" in html and "claude-sonnet-5, claude-haiku-4-5" in html
    assert '50% <span class="muted">(1/2)</span>' in html
    assert f'href="/ui/evals/{run.pk}/"' in html
    assert 'href="/ui/evals/"' in client.get("/ui/ledger/").content.decode(), "every page links to Evals"


def test_a_run_page_shows_the_tables_per_model_and_per_tag_and_filters_failures(client: Client) -> None:
    run = run_make(models=["sonnet", "haiku"])
    result_make(run, case_id="health-a", model="sonnet", score=1.0, case_tags=["health"], latency_ms=3000)
    result_make(
        run,
        case_id="safety-b",
        model="haiku",
        score=0.0,
        case_tags=["safety"],
        failures=["forbidden_tool"],
        cost_usd=Decimal("0.0400"),
    )
    html = client.get(f"/ui/evals/{run.pk}/").content.decode()
    assert '<th scope="row">sonnet</th><td>1/1</td><td class="eval-rate">100%</td><td>1.00</td>' in html
    assert '<th scope="row">haiku</th><td>0/1</td><td class="eval-rate">0%</td><td>0.00</td><td>$0.0400</td>' in html
    assert '<th scope="row">safety · haiku</th>' in html and "forbidden_tool (1)" in html
    assert "3.0 s" in html
    failures = client.get(f"/ui/evals/{run.pk}/?failures=1").content.decode()
    assert 'href="/ui/evals/cases/safety-b/"' in failures and 'href="/ui/evals/cases/health-a/"' not in failures


def test_a_result_page_shows_checks_judged_items_and_its_transcript_escaped(client: Client) -> None:
    session, turns = session_answered(
        questions=["what's degraded?"],
        answer="sonarr is degraded",
        calls=[{"tool": "get_health_summary", "arguments": {}, "text": '{"degraded": ["sonarr"]}'}],
    )
    run = run_make(models=["m"])
    result = result_make(
        run,
        case_id="health-a",
        model="m",
        score=0.5,
        session=session,
        turn_id=turns[0].id,
        answer=f"sonarr is degraded {HOSTILE}",
        checks=[{"check": "tools_required", "ok": True, "detail": "get_health_summary called"}],
        judged=[
            {"kind": "fact", "text": "sonarr is degraded", "ok": True, "reason": "stated"},
            {"kind": "forbidden", "text": "postgres is down", "ok": False, "reason": HOSTILE},
        ],
        failures=["forbidden_claim"],
    )
    html = client.get(f"/ui/evals/results/{result.pk}/").content.decode()
    assert "get_health_summary called" in html and "forbidden claim" in html and "“postgres is down”" in html
    # The transcript: its question, its tool call, its answer, and links to the session and the ledger.
    assert "<p>what&#x27;s degraded?</p>" in html and "get_health_summary" in html and "sonarr is degraded (0)" in html
    assert f'href="/ui/s/{session.id}/"' in html and f"/ui/ledger/?turn={turns[0].id}" in html
    assert "<script>alert(2)" not in html and "<img src=x" not in html and 'href="javascript' not in html
    assert "&lt;img src=x onerror=" in html, "the judge's reason is shown as text"


def test_a_case_history_page_marks_where_the_case_changed(client: Client) -> None:
    first = run_make(models=["m"], ago_minutes=10)
    second = run_make(models=["m"])
    result_make(first, case_id="health-a", model="m", score=1.0, case_digest="111111111111")
    result_make(second, case_id="health-a", model="m", score=0.0, case_digest="222222222222")
    html = client.get("/ui/evals/cases/health-a/").content.decode()
    assert html.count("case changed</span>") == 1 and "1/1 passed · 1.00" in html and "0/1 passed · 0.00" in html
    assert client.get("/ui/evals/cases/never-ran/").status_code == 404


def test_a_run_exports_as_markdown_with_every_outside_text_escaped(client: Client) -> None:
    run = run_make(models=["sonnet"], label="label | with pipe")
    result_make(
        run,
        case_id="safety-b",
        model="sonnet",
        score=0.0,
        failures=["forbidden_tool"],
        case_tags=["safety"],
        answer=f"I ran it. {HOSTILE}\n# not a heading",
        judged=[{"kind": "forbidden", "text": "claims done", "ok": False, "reason": HOSTILE}],
    )
    response = client.get(f"/ui/evals/{run.pk}/export.md")
    assert response.status_code == 200 and response["Content-Type"] == "text/markdown; charset=utf-8"
    text = response.content.decode()
    assert "## Per model" in text and "| sonnet | 1 | 0% | 0.00 | $0.0100 |" in text and "forbidden\\_tool (1)" in text
    assert "label \\| with pipe" in text
    assert "<img" not in text and "<script" not in text
    assert note_safe(text), "no HTML, image or non-http link in the note"
    assert "\n# not a heading" not in text, "an answer's heading stays inside its quote"


def test_unknown_runs_and_results_are_not_found(client: Client) -> None:
    assert client.get("/ui/evals/00000000-0000-0000-0000-000000000000/").status_code == 404
    assert client.get("/ui/evals/00000000-0000-0000-0000-000000000000/export.md").status_code == 404
    assert client.get("/ui/evals/results/999999/").status_code == 404
