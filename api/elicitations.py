"""`GET /elicitations` and `POST /elicitations/<id>`: MCP servers' questions, answered by scripts.

The control room answers them with a form; these endpoints do the same for a script or another
tool of the operator's. Only turns an operator started (the control room, `/chat`) wait for an
answer; the others declined theirs already (see `agent.elicitation.turn`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from channels.db import database_sync_to_async
from django.http import HttpRequest, JsonResponse

from agent.elicitation import store as elicitations
from agent.elicitation.types import ACTIONS, ElicitContentError
from api.bodies import elicitation_id_parse, fields_check, json_object_read
from api.errors import ApiError, api_view
from api.operator import request_actor


@api_view("GET")
async def elicitation_list(request: HttpRequest) -> JsonResponse:
    """The questions waiting for an operator, oldest first."""
    request_actor(request)
    pending = await database_sync_to_async(elicitations.elicitations_pending)()
    return JsonResponse({"elicitations": [_json(item) for item in pending]})


@api_view("POST")
async def elicitation_answer(request: HttpRequest, elicitation_id: str) -> JsonResponse:
    """Answer one: `{"action": "accept", "content": {...}}`, `{"action": "decline"}` or `cancel`.

    Accepted content is checked against the requested schema (fields left out take their
    defaults); the first answer wins and reaches the server, a later one gets 409.
    """
    operator = request_actor(request)
    parsed = elicitation_id_parse(elicitation_id)
    body = json_object_read(request)
    fields_check(body, allowed=("action", "content"))
    action = body.get("action")
    if action not in ACTIONS:
        raise ApiError(400, "invalid_action", f'"action" must be one of {", ".join(ACTIONS)}.')
    content = body.get("content", {})
    if content is None:
        content = {}
    if not isinstance(content, dict):
        raise ApiError(400, "invalid_content", '"content" must be an object of the requested fields.')
    if action != "accept" and content:
        raise ApiError(400, "invalid_content", f'"content" goes only with "accept", not with "{action}".')
    try:
        row = await database_sync_to_async(elicitations.elicitation_answer)(
            elicitation_id=parsed, action=action, values=content, operator=operator
        )
    except elicitations.ElicitationNotFound:
        raise ApiError(404, "elicitation_not_found", f"There is no elicitation with id {parsed}.") from None
    except elicitations.ElicitationClosed as closed:
        raise ApiError(409, "elicitation_closed", str(closed), elicitation_status=closed.elicitation.status) from None
    except ElicitContentError as invalid:
        raise ApiError(
            400, "invalid_content", f"The content does not fit the form: {invalid}", errors=invalid.errors
        ) from None
    await elicitations.elicitation_answered_publish(row)
    return JsonResponse(
        {"id": str(row.pk), "status": row.status, "content": row.content, "answered_by": row.answered_by}
    )


def _json(item: elicitations.PendingElicitation) -> dict[str, Any]:
    data = dataclasses.asdict(item)
    data["expires_at"] = item.expires_at.isoformat()
    return data
