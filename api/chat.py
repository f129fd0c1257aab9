"""`POST /chat`: ask Hermes; the answer streams back as Server-Sent Events while the turn runs."""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest, StreamingHttpResponse

from agent.elicitation.store import elicitation_by_operator
from agent.engine.runner import TurnRejected
from agent.live import turn_registry
from agent.tools import MCPConfigError, tool_hub
from api.bodies import fields_check, json_object_read, model_parse, session_id_parse
from api.errors import ApiError, api_view
from api.operator import request_actor
from api.sse import turn_event_stream

# What each refusal of the engine means over HTTP; all are answered before anything is stored.
REJECTION_STATUS = {
    "invalid_message": 400,
    "model_not_allowed": 400,
    "message_too_large": 413,
    "session_not_found": 404,
    "session_busy": 409,
    # Today's token budget is spent: the request conflicts with the operator's spending limit.
    "budget_exhausted": 409,
    "llm_not_configured": 503,
    "persona_missing": 503,
    "shutting_down": 503,
}


@api_view("POST")
async def chat(request: HttpRequest) -> StreamingHttpResponse:
    """Start a turn and stream its events; errors before the turn starts are JSON 4xx/503."""
    body = json_object_read(request)
    fields_check(body, allowed=("message", "session_id", "model"))
    message = body.get("message")
    if message is None:
        raise ApiError(400, "invalid_message", 'The body needs a "message": the question, as a string.')
    if not isinstance(message, str):
        raise ApiError(400, "invalid_message", '"message" must be a string.')
    # Absent or null: a new session.
    session_id = None if body.get("session_id") is None else session_id_parse(body["session_id"])
    model = model_parse(body.get("model"))
    try:
        hub = tool_hub()
    except MCPConfigError as exc:
        raise ApiError(503, "mcp_config_error", str(exc)) from None
    try:
        # Followed live: the control room shows the turn, and it can be stopped from anywhere.
        handle = await turn_registry().start(
            text=message,
            actor=request_actor(request),
            origin="api",
            session_id=session_id,
            hub=hub,
            model=model,
            # The caller is a script, but an operator can answer in the control room or by API.
            answerer=elicitation_by_operator,
        )
    except TurnRejected as rejected:
        raise ApiError(REJECTION_STATUS.get(rejected.code, 400), rejected.code, rejected.message) from None

    response = StreamingHttpResponse(
        turn_event_stream(handle, keepalive=settings.HERMES_SSE_KEEPALIVE),
        content_type="text/event-stream; charset=utf-8",
    )
    # Nothing between the engine and the client may buffer or cache the stream.
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"
    response["X-Hermes-Session"] = str(handle.session_id)
    response["X-Hermes-Turn"] = str(handle.turn_id)
    return response
