"""The search page: every session's questions, answers and tool calls, from the nav's search box."""

from __future__ import annotations

from dataclasses import dataclass

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from agent.search.query import LIMIT_MAX, SearchHit, search_run
from common.dom import turn_link
from controlroom import selectors
from controlroom.forms import SearchForm
from controlroom.views.pages import around_page


@dataclass(frozen=True)
class HitRow:
    hit: SearchHit
    url: str


@require_GET
def search_page(request: HttpRequest) -> HttpResponse:
    form = SearchForm(request.GET)
    rows: list[HitRow] = []
    filters = None
    if form.is_valid():
        filters = form.filters()
        rows = [
            HitRow(hit=hit, url=turn_link(hit.session_id, hit.turn_id, hit.tool_use_id)) for hit in search_run(filters)
        ]
    context = {
        **around_page(request),
        "form": form,
        "query": filters.query if filters else request.GET.get("q", "")[:200],
        "rows": rows,
        "tools": selectors.ledger_choices()["tools"],
        "origins": selectors.session_origins(),
        "limit": LIMIT_MAX,
    }
    return render(request, "controlroom/search.html", context)
