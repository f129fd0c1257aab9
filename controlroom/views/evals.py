"""The Evals pages: runs, a run's tables and results, a case's history, one result with its
transcript, a run as Markdown, the case files, and saving a finished session as a case."""

from __future__ import annotations

import re
import uuid

from django.http import Http404, HttpRequest, HttpResponse, HttpResponseForbidden
from django.shortcuts import render
from django.views.decorators.http import require_GET, require_http_methods

from controlroom.identity import operator_name
from controlroom.views.pages import around_page
from evals import selectors
from evals.export_markdown import run_markdown
from evals.saving import CaseForm, CaseSaveRefused, SessionDraft, case_files, case_save, cases_dir, session_draft
from transcript import selectors as transcript_selectors


@require_GET
def evals_page(request: HttpRequest) -> HttpResponse:
    context = {**around_page(request), "runs": selectors.runs_recent()}
    return render(request, "controlroom/evals.html", context)


@require_GET
def run_page(request: HttpRequest, run_id: uuid.UUID) -> HttpResponse:
    failures_only = request.GET.get("failures") == "1"
    view = selectors.run_view(run_id=run_id, failures_only=failures_only)
    if view is None:
        raise Http404("There is no eval run with this id.")
    return render(request, "controlroom/eval_run.html", {**around_page(request), "view": view})


@require_GET
def run_export(request: HttpRequest, run_id: uuid.UUID) -> HttpResponse:
    """The run as a Markdown note (tables, then each result), every outside text escaped."""
    view = selectors.run_view(run_id=run_id)
    if view is None:
        raise Http404("There is no eval run with this id.")
    response = HttpResponse(run_markdown(view), content_type="text/markdown; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="hermes-eval-{view.run.started_at:%Y-%m-%d-%H%M}.md"'
    return response


@require_GET
def result_page(request: HttpRequest, result_id: int) -> HttpResponse:
    """One result: checks, judged items, failures, the answer, and the transcript of its session."""
    view = selectors.result_view(result_id=result_id)
    if view is None:
        raise Http404("There is no eval result with this id.")
    turns = transcript_selectors.session_turn_views(session_id=view.session_id) if view.session_id else []
    context = {**around_page(request), "view": view, "result": view.result, "turns": turns, "approvals": {}}
    return render(request, "controlroom/eval_result.html", context)


@require_GET
def case_page(request: HttpRequest, case_id: str) -> HttpResponse:
    """A case's score and pass per model in each run, marking where the case file changed."""
    history = selectors.case_history(case_id=case_id)
    case_file = next((file for file in case_files() if file.id == case_id), None)
    if not history.entries and case_file is None:
        raise Http404("No case file and no run has this case.")
    context = {**around_page(request), "history": history, "case_file": case_file}
    return render(request, "controlroom/eval_case.html", context)


@require_GET
def cases_page(request: HttpRequest) -> HttpResponse:
    """The case files (id, title, tags, source), a saved case among them for review."""
    context = {**around_page(request), "files": case_files(), "directory": cases_dir()}
    return render(request, "controlroom/eval_cases.html", context)


@require_http_methods(["GET", "POST"])
def case_save_page(request: HttpRequest, session_id: uuid.UUID) -> HttpResponse:
    """Save a finished session as an eval case: the operator states the true answer or cause."""
    if operator_name(request) is None:
        return HttpResponseForbidden("No operator identity.")
    draft = session_draft(session_id=session_id)
    if draft is None:
        raise Http404("There is no session with this id.")
    form = _form_initial(draft) if request.method == "GET" else _form_read(request)
    context = {**around_page(request), "draft": draft, "form": form, "directory": cases_dir(), "error": "", "saved": ""}
    status = 200
    if request.method == "POST":
        if not draft.finished:
            context["error"] = "The session's last turn is not done: save it once Hermes has answered."
            status = 400
        else:
            try:
                context["saved"] = str(case_save(draft, _case_form(form)))
            except CaseSaveRefused as refused:
                context["error"] = str(refused)
                status = 400
    return render(request, "controlroom/eval_save.html", context, status=status)


def _form_initial(draft: SessionDraft) -> dict[str, str]:
    return {
        "truth": "",
        "title": draft.title,
        "slug": draft.slug,
        "tags": "saved",
        "facts": "",
        "forbidden_claims": "",
        "tools_required": " ".join(draft.tools),
    }


def _form_read(request: HttpRequest) -> dict[str, str]:
    fields = ("truth", "title", "slug", "tags", "facts", "forbidden_claims", "tools_required")
    return {name: str(request.POST.get(name, ""))[:20_000] for name in fields}


def _case_form(form: dict[str, str]) -> CaseForm:
    return CaseForm(
        truth=form["truth"],
        title=form["title"],
        slug=form["slug"].strip(),
        tags=_words(form["tags"]),
        facts=_lines(form["facts"]),
        forbidden_claims=_lines(form["forbidden_claims"]),
        tools_required=_words(form["tools_required"]),
    )


def _lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip()]


def _words(text: str) -> list[str]:
    return [word for word in re.split(r"[\s,]+", text) if word]
