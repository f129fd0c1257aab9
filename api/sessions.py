"""`GET /sessions` (most recently active first, paginated) and `GET /sessions/<id>` (the full history).

Links are absolute paths built by `reverse()`, so behind a proxy prefix they carry it (`/agent/…`).
"""

from __future__ import annotations

import uuid
from typing import Any
from urllib.parse import urlencode

from channels.db import database_sync_to_async
from django.http import HttpRequest, JsonResponse
from django.urls import reverse

from agent import selectors
from api.bodies import session_id_parse
from api.errors import ApiError, api_view

PAGE_SIZE_DEFAULT = 20
PAGE_SIZE_MAX = 100
# A session's history comes a page of turns at a time, latest first: a session of thousands of
# turns would otherwise be megabytes of JSON for a client that wants the last answer.
TURNS_DEFAULT = 50
TURNS_MAX = 500


@api_view("GET")
async def session_list(request: HttpRequest) -> JsonResponse:
    page = _positive_int(request.GET.get("page"), name="page", default=1)
    page_size = _positive_int(request.GET.get("page_size"), name="page_size", default=PAGE_SIZE_DEFAULT)
    if page_size > PAGE_SIZE_MAX:
        raise ApiError(400, "invalid_parameter", f"page_size may be at most {PAGE_SIZE_MAX}.")
    try:
        listed = await database_sync_to_async(selectors.session_page)(page=page, page_size=page_size)
    except selectors.PageOutOfRange as exc:
        message = f"There is no page {exc.page}; the last is {exc.page_count}."
        raise ApiError(404, "page_out_of_range", message) from None
    return JsonResponse(
        {
            "count": listed.total,
            "page": listed.page,
            "page_size": page_size,
            "page_count": listed.page_count,
            "next": _page_link(listed.page + 1, page_size) if listed.has_next else None,
            "previous": _page_link(listed.page - 1, page_size) if listed.has_previous else None,
            "sessions": [_session_json(summary) for summary in listed.sessions],
        }
    )


@api_view("GET")
async def session_detail(request: HttpRequest, session_id: str) -> JsonResponse:
    parsed = session_id_parse(session_id)
    turns = _positive_int(request.GET.get("turns"), name="turns", default=TURNS_DEFAULT)
    if turns > TURNS_MAX:
        raise ApiError(400, "invalid_parameter", f"turns may be at most {TURNS_MAX}.")
    before = _turn_id_parse(request.GET.get("before"))
    try:
        detail = await database_sync_to_async(selectors.session_detail)(session_id=parsed, before=before, limit=turns)
    except LookupError:
        raise ApiError(404, "turn_not_found", f"Session {parsed} has no turn {before}.") from None
    if detail is None:
        raise ApiError(404, "session_not_found", f"There is no session with id {parsed}.")
    earlier = None
    if detail.earlier_than is not None:
        query = urlencode({"before": detail.earlier_than, "turns": turns})
        earlier = f"{reverse('api:session', args=[parsed])}?{query}"
    return JsonResponse(
        {
            **_session_json(detail.session),
            "earlier": earlier,
            "turns": [
                {
                    "id": turn.id,
                    "actor": turn.actor,
                    "status": turn.status,
                    "stop_reason": turn.stop_reason,
                    "error": turn.error,
                    "model": turn.model,
                    "usage": turn.usage,
                    "tokens_total": turn.tokens_total,
                    # A string: dollars to the micro-dollar, without float rounding.
                    "cost_usd": None if turn.cost_usd is None else str(turn.cost_usd),
                    "iterations": turn.iterations,
                    "started_at": turn.started_at,
                    "finished_at": turn.finished_at,
                    "duration_ms": turn.duration_ms,
                }
                for turn in detail.turns
            ],
            "messages": [
                {
                    "id": message.id,
                    "turn_id": message.turn_id,
                    "role": message.role,
                    "content": message.content,
                    "kind": message.kind,
                    "replaces_through": message.replaces_through,
                    "created_at": message.created_at,
                }
                for message in detail.messages
            ],
            "context": {
                "tokens": detail.context.tokens,
                "window": detail.context.window,
                "percent": detail.context.percent,
                "compactions": detail.context.compactions,
                "compacted_at": detail.context.compacted_at,
            },
        }
    )


def _session_json(summary: selectors.SessionSummary) -> dict[str, Any]:
    return {
        "id": summary.id,
        "url": reverse("api:session", args=[summary.id]),
        "title": summary.title,
        "actor": summary.actor,
        "origin": summary.origin,
        "created_at": summary.created_at,
        "last_active_at": summary.last_active_at,
        "turn_count": summary.turn_count,
        "model": summary.model,
    }


def _page_link(page: int, page_size: int) -> str:
    return f"{reverse('api:sessions')}?{urlencode({'page': page, 'page_size': page_size})}"


def _turn_id_parse(raw: str | None) -> uuid.UUID | None:
    if raw is None:
        return None
    try:
        return uuid.UUID(raw)
    except ValueError:
        raise ApiError(400, "invalid_parameter", f"before must be a turn id (a UUID), not {raw[:40]!r}.") from None


def _positive_int(raw: str | None, *, name: str, default: int) -> int:
    if raw is None:
        return default
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 9 or int(raw) < 1:
        raise ApiError(400, "invalid_parameter", f"{name} must be a whole number of at least 1, not {raw[:40]!r}.")
    return int(raw)
