"""The investigations page: every session Hermes opened itself on an Oikos event, filterable.

The list is also served alone (`investigations_list`): an open page fetches it again, with its
filters and page, when the socket says an investigation opened or changed (see
`controlroom.consumers.ControlRoomConsumer.investigation_news`).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from controlroom.forms import InvestigationFilterForm
from controlroom.identity import operator_name
from controlroom.views.pages import around_page
from oikos.change_view import session_change_views
from watch import selectors
from watch.models import Investigation
from watch.recollection import recollection_of


def _listing(request: HttpRequest) -> dict[str, Any]:
    form = InvestigationFilterForm(request.GET)
    filters = selectors.InvestigationFilters()
    page_number = 1
    if form.is_valid():
        data = form.cleaned_data
        filters = selectors.InvestigationFilters(entity=data["entity"], state=data["state"], kind=data["kind"])
        page_number = data["page"] or 1
    chosen = {"entity": filters.entity, "state": filters.state, "kind": filters.kind}
    page = selectors.investigations_page(filters=filters, page=page_number)
    # What each brief recalled of the last times, linked (`watch.recollection`); the page keeps its rows.
    for investigation in page:
        investigation.recollection = recollection_of(investigation)  # type: ignore[attr-defined]
    return {
        "form": form,
        "filters": filters,
        "page": page,
        # What the actions each investigation's session asked for came to (`oikos.change_view`).
        "changes": session_change_views(investigation.session_id for investigation in page),
        # The pager's links keep the filters.
        "filter_query": urlencode({key: value for key, value in chosen.items() if value}),
    }


@require_GET
def investigations_page(request: HttpRequest) -> HttpResponse:
    """Open, resolved and skipped investigations, newest first; filter by entity, state and kind."""
    context = {
        **around_page(request, follow_investigations=True),
        **_listing(request),
        "choices": selectors.investigation_choices(),
        "state_choices": [("", "any"), *Investigation.State.choices],
    }
    return render(request, "controlroom/investigations.html", context)


@require_GET
def investigations_list(request: HttpRequest) -> HttpResponse:
    """The list alone, as the page's filters and page select it (for live refreshes)."""
    if operator_name(request) is None:
        return HttpResponse(status=403)
    return render(request, "controlroom/partials/investigation_list.html", _listing(request))
