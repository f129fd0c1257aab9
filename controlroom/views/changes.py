"""The Changes page: every execution Hermes asked Oikos for, as `GET /changes` lists them
(`agent.store.change_entries`), filterable by target and time.

The list is also served alone (`changes_list`): an open page fetches it again, with its filters,
when the socket says Hermes's record of an execution changed (`controlroom.feeds.lists.ChangesFeed`).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils.dateparse import parse_datetime
from django.views.decorators.http import require_GET

from agent.store.change_entries import ChangeFilters, FilterError, changes_page, moment_parse, target_parse
from controlroom.identity import operator_name
from controlroom.views.pages import around_page

PAGE_SIZE = 50


def _listing(request: HttpRequest) -> dict[str, Any]:
    shown = {name: request.GET.get(name, "").strip()[:200] for name in ("target", "since", "until", "before")}
    rows: list[dict[str, Any]] = []
    error = ""
    older_url = ""
    try:
        filters = ChangeFilters(
            target=target_parse(shown["target"]),
            since=moment_parse(shown["since"], name="since"),
            until=moment_parse(shown["until"], name="until", end_of_day=True),
            limit=PAGE_SIZE,
            before=shown["before"][:100],
        )
        page = changes_page(filters)
    except FilterError as exc:
        error = str(exc)
    except LookupError:
        error = "That page of changes is gone; showing none. Start again from the newest."
    else:
        rows = [{**entry, "requested": parse_datetime(entry["requested_at"])} for entry in page.entries]
        if page.next_before:
            older_url = _url(shown, before=page.next_before)
    return {
        "filters": shown,
        "filtered": any(shown[name] for name in ("target", "since", "until")),
        "rows": rows,
        "error": error,
        "older_url": older_url,
        "newest_url": _url(shown, before="") if shown["before"] else "",
    }


def _url(shown: dict[str, str], *, before: str) -> str:
    query = {name: value for name, value in {**shown, "before": before}.items() if value}
    return f"{reverse('controlroom:changes')}?{urlencode(query)}" if query else reverse("controlroom:changes")


@require_GET
def changes_view(request: HttpRequest) -> HttpResponse:
    """Newest first; filter by target (a slug or a kind) and by since/until."""
    context = {**around_page(request, follow_changes=True), **_listing(request)}
    return render(request, "controlroom/changes.html", context)


@require_GET
def changes_list_view(request: HttpRequest) -> HttpResponse:
    """The list alone, as the page's filters select it (for live refreshes)."""
    if operator_name(request) is None:
        return HttpResponse(status=403)
    return render(request, "controlroom/partials/change_list.html", _listing(request))
