"""`GET /changes`: every execution Hermes asked Oikos for, newest first (`agent.models.Change`).

What was asked (action, params, target), where and by whom (session, turn, `asked_by`), who
decided, how it ended, the follow-up's verdict and the way back (`undo`, `undone_by`,
`undo_of`). Filters: `target` (a slug, or a kind such as `service:`), `since`/`until` (ISO 8601),
`session`. Pages are keyset: `next` carries `before=<execution id>` of the page's last change.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from channels.db import database_sync_to_async
from django.http import HttpRequest, JsonResponse
from django.urls import reverse

from agent.store.change_entries import (
    ChangeFilters,
    FilterError,
    changes_page,
    limit_parse,
    moment_parse,
    session_parse,
    target_parse,
)
from api.errors import ApiError, api_view

# Execution ids are Oikos's (`Change.execution_id` holds up to this many characters).
BEFORE_MAX_CHARS = 100


@api_view("GET")
async def changes(request: HttpRequest) -> JsonResponse:
    params = request.GET
    try:
        filters = ChangeFilters(
            target=target_parse(params.get("target")),
            since=moment_parse(_given(params, "since"), name="since"),
            until=moment_parse(_given(params, "until"), name="until", end_of_day=True),
            session_id=session_parse(_given(params, "session")),
            limit=limit_parse(_given(params, "limit")),
            before=_before(params.get("before")),
        )
    except FilterError as exc:
        raise ApiError(400, "invalid_parameter", str(exc)) from None
    if filters.since and filters.until and filters.since >= filters.until:
        raise ApiError(400, "invalid_parameter", "since must be earlier than until.")
    try:
        page = await database_sync_to_async(changes_page)(filters)
    except LookupError:
        message = f"before must be the execution id of a listed change; there is none {filters.before!r}."
        raise ApiError(400, "invalid_parameter", message) from None
    following = None
    if page.next_before:
        kept = {name: params[name] for name in ("target", "since", "until", "session", "limit") if params.get(name)}
        following = f"{reverse('api:changes')}?{urlencode({**kept, 'before': page.next_before})}"
    return JsonResponse({"count": len(page.entries), "next": following, "changes": page.entries})


def _given(params: Any, name: str) -> str | None:
    """A parameter as sent: absent is None; present, it must be a value (`?since=` is not "no bound")."""
    if name not in params:
        return None
    value = str(params.get(name))
    if not value or value != value.strip():
        raise FilterError(f"{name} must be a value without surrounding spaces, or left out; not {value[:40]!r}.")
    return value


def _before(raw: str | None) -> str:
    value = raw or ""
    if len(value) > BEFORE_MAX_CHARS:
        raise FilterError(f"before must be an execution id of at most {BEFORE_MAX_CHARS} characters.")
    return value
