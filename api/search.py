"""`GET /search?q=`: the control room's search for scripts — ranked hits with snippets and links.

Each hit links to the control room's page of its session, at the turn (or the tool call) it came
from. `snippet` is plain text; `snippet_html` is the same escaped, with `<mark>` around matches
(the only markup in it, added by Hermes).
"""

from __future__ import annotations

import datetime
from typing import Any

from channels.db import database_sync_to_async
from django.http import HttpRequest, JsonResponse
from django.utils.dateparse import parse_date, parse_datetime

from agent.search.query import LIMIT_DEFAULT, LIMIT_MAX, QUERY_MAX_CHARS, SearchFilters, SearchHit, search_run
from api.errors import ApiError, api_view
from common.dom import turn_link

TEXT_PARAMETER_MAX = 200


@api_view("GET")
async def search(request: HttpRequest) -> JsonResponse:
    filters = search_filters_parse(request.GET)
    hits = await database_sync_to_async(search_run)(filters)
    return JsonResponse({"query": filters.query, "count": len(hits), "results": [_hit_json(hit) for hit in hits]})


def search_filters_parse(params: Any) -> SearchFilters:
    """The filters of a search request (the API's and the control room's), or a clear 400."""
    query = _text(params, "q", limit=QUERY_MAX_CHARS).strip()
    if not query:
        raise ApiError(400, "missing_query", 'Say what to look for: /search?q=words ("a phrase", -excluded).')
    limit_raw = params.get("limit") or str(LIMIT_DEFAULT)
    if (
        not (limit_raw.isascii() and limit_raw.isdigit() and len(limit_raw) <= 3)
        or not 1 <= int(limit_raw) <= LIMIT_MAX
    ):
        raise ApiError(400, "invalid_parameter", f"limit must be a whole number from 1 to {LIMIT_MAX}.")
    return SearchFilters(
        query=query,
        since=_instant(params, "since", end_of_day=False),
        until=_instant(params, "until", end_of_day=True),
        actor=_text(params, "actor"),
        origin=_text(params, "origin"),
        tool=_text(params, "tool"),
        limit=int(limit_raw),
    )


def _text(params: Any, name: str, *, limit: int = TEXT_PARAMETER_MAX) -> str:
    value = str(params.get(name) or "")
    if len(value) > limit:
        raise ApiError(400, "invalid_parameter", f"{name} may be at most {limit} characters.")
    if "\x00" in value:
        raise ApiError(400, "invalid_parameter", f"{name} may not contain NUL characters.")
    return value


def _instant(params: Any, name: str, *, end_of_day: bool) -> datetime.datetime | None:
    """A date (`2026-11-30`: the whole day, in UTC) or an ISO 8601 date and time with its offset.

    `until` is inclusive of a date given alone: hits up to the end of that day.
    """
    raw = _text(params, name, limit=40).strip()
    if not raw:
        return None
    try:
        moment = parse_datetime(raw)
        if moment is not None:
            return (moment if moment.tzinfo is not None else moment.replace(tzinfo=datetime.UTC)).astimezone(
                datetime.UTC
            )
        day = parse_date(raw)
        if day is not None:
            start = datetime.datetime.combine(day, datetime.time(), tzinfo=datetime.UTC)
            return start + datetime.timedelta(days=1) if end_of_day else start
    except OverflowError:
        # A date past what can be represented (year 1 or 9999 and an offset): no bound at all.
        return None
    except ValueError:
        pass
    message = f"{name} must be a date (2026-11-30) or an ISO 8601 date and time, not {raw[:40]!r}."
    raise ApiError(400, "invalid_parameter", message)


def _hit_json(hit: SearchHit) -> dict[str, Any]:
    return {
        "session_id": hit.session_id,
        "session_title": hit.session_title,
        "actor": hit.actor,
        "origin": hit.origin,
        "turn_id": hit.turn_id,
        "kind": hit.kind,
        "server": hit.server,
        "tool": hit.tool,
        "created_at": hit.created_at,
        "rank": hit.rank,
        "snippet": hit.snippet_plain,
        "snippet_html": str(hit.snippet_html),
        "url": turn_link(hit.session_id, hit.turn_id, hit.tool_use_id),
    }
