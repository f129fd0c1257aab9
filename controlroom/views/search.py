"""The search page: every session's questions, answers and tool calls, and operators' notes, from
the nav's search box."""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urlencode

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from agent.search.entries import HIGHLIGHT_START, HIGHLIGHT_STOP
from agent.search.notes import NoteHit, notes_search
from agent.search.query import LIMIT_MAX, SearchHit, search_run
from common.dom import turn_link
from controlroom import selectors
from controlroom.forms import SearchForm
from controlroom.views.pages import around_page

# The words a snippet marks as matching (the database's own matching: stems, phrases).
_MARKED = re.compile(re.escape(HIGHLIGHT_START) + "(.*?)(?:" + re.escape(HIGHLIGHT_STOP) + "|$)", re.DOTALL)
# At most this many distinct words travel in a hit's link (`hit_url`).
HIGHLIGHT_WORDS_MAX = 8
NOTES_SHOWN = 10


@dataclass(frozen=True)
class HitRow:
    hit: SearchHit
    url: str


def hit_url(hit: SearchHit) -> str:
    """The hit's place in its session, with the words its snippet marks as `hl`: the session page
    opens the tool chip the link lands on and marks those words in it (static/controlroom/controlroom.js)."""
    link = turn_link(hit.session_id, hit.turn_id, hit.tool_use_id)
    words: list[str] = []
    for match in _MARKED.finditer(hit.snippet):
        word = match.group(1).strip()
        if word and word.casefold() not in (w.casefold() for w in words):
            words.append(word[:100])
    if not words or "#" not in link:
        return link
    page, anchor = link.split("#", 1)
    return f"{page}?{urlencode([('hl', word) for word in words[:HIGHLIGHT_WORDS_MAX]])}#{anchor}"


@require_GET
def search_page(request: HttpRequest) -> HttpResponse:
    form = SearchForm(request.GET)
    rows: list[HitRow] = []
    notes: list[NoteHit] = []
    filters = None
    if form.is_valid():
        filters = form.filters()
        rows = [HitRow(hit=hit, url=hit_url(hit)) for hit in search_run(filters)]
        # Notes have no session, actor or tool: a search narrowed by those finds none.
        if not (filters.actor or filters.origin or filters.tool or filters.since or filters.until):
            notes = notes_search(filters.query, limit=NOTES_SHOWN)
    context = {
        **around_page(request),
        "form": form,
        "query": filters.query if filters else request.GET.get("q", "")[:200],
        "rows": rows,
        "notes": notes,
        "tools": selectors.ledger_choices()["tools"],
        "origins": selectors.session_origins(),
        "limit": LIMIT_MAX,
    }
    return render(request, "controlroom/search.html", context)
