"""`POST /turns/<id>/stop`: stop a running turn, in whichever Hermes process runs it."""

from __future__ import annotations

from channels.db import database_sync_to_async
from django.http import HttpRequest, JsonResponse

from agent import selectors
from agent.live import turn_registry
from agent.models import Turn
from api.bodies import fields_check, json_object_read, turn_id_parse
from api.errors import ApiError, api_view
from api.operator import request_actor


@api_view("POST")
async def turn_stop(request: HttpRequest, turn_id: str) -> JsonResponse:
    """Ask the turn's process to cancel it; answers 202 at once.

    The turn then ends `cancelled`, keeping what it said so far, and whoever follows it (a `/chat`
    stream, the control room) sees its `done`. A turn whose process is gone is ended here at once
    (`interrupted`, 200). The body must be sent as JSON (it may be empty), which keeps a cross-site
    form from stopping turns.
    """
    request_actor(request)
    fields_check(json_object_read(request, empty_ok=True), allowed=())
    parsed = turn_id_parse(turn_id)
    turn = await database_sync_to_async(selectors.turn_status)(turn_id=parsed)
    if turn is None:
        raise ApiError(404, "turn_not_found", f"There is no turn with id {parsed}.")
    if turn.status != Turn.Status.RUNNING:
        raise ApiError(409, "turn_finished", f"The turn already ended ({turn.status}).", turn_status=turn.status)
    if await turn_registry().turn_stop(turn_id=parsed):
        # Its process is gone: it was ended here and then.
        return JsonResponse({"turn_id": parsed, "session_id": turn.session_id, "status": "interrupted"}, status=200)
    return JsonResponse({"turn_id": parsed, "session_id": turn.session_id, "status": "stopping"}, status=202)
