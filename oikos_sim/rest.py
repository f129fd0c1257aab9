"""The REST API at ``/api/v1``: fleet health, approvals and executions (the control room's side).

Every route sits behind the bearer middleware; the caller's actor is ``scope["oikos.actor"]``.
Errors are JSON ``{"error": <code>, "message": <sentence>}`` with a fitting status.
"""

from __future__ import annotations

import json
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from oikos_sim.auth import ACTOR_SCOPE_KEY
from oikos_sim.errors import AlreadyDecided, InvalidRequest, NotFound, SimError, UnknownEntity
from oikos_sim.executions import MAX_TEXT, execution_detail
from oikos_sim.graph import blast_radius
from oikos_sim.health import health_summary
from oikos_sim.sse import events_endpoint
from oikos_sim.state import SimState

MAX_BODY_BYTES = 64 * 1024
MAX_OPERATOR = 100
MAX_EXECUTIONS_LISTED = 50


def _error(http_status: int, code: str, message: str, **extra: Any) -> JSONResponse:
    return JSONResponse({"error": code, "message": message, **extra}, status_code=http_status)


def _actor(request: Request) -> str:
    return str(request.scope[ACTOR_SCOPE_KEY])


def _requester(request: Request, body: dict[str, Any]) -> str:
    """Who asks for an execution: a service (the control room) may name the operator it asks for, as
    decisions do; an agent is always itself."""
    via = _actor(request)
    operator = body.get("operator")
    if via.startswith("agent:") or not isinstance(operator, str) or not operator.strip():
        return via
    operator = operator.strip()
    if operator.startswith("agent:") or len(operator) > MAX_OPERATOR:
        raise InvalidRequest(f"{operator[:MAX_OPERATOR]!r} cannot request executions for an operator.")
    return operator


async def _json_object(request: Request) -> dict[str, Any]:
    """The request body as a JSON object (an empty body counts as ``{}``)."""
    raw = await request.body()
    if len(raw) > MAX_BODY_BYTES:
        raise InvalidRequest(f"Request body is larger than {MAX_BODY_BYTES} bytes.")
    if not raw.strip():
        return {}
    try:
        body = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise InvalidRequest(f"Request body is not valid JSON: {error}.") from error
    if not isinstance(body, dict):
        raise InvalidRequest("Request body must be a JSON object.")
    return body


def _optional_text(body: dict[str, Any], key: str) -> str | None:
    value = body.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or len(value) > MAX_TEXT:
        raise InvalidRequest(f"{key} must be a string of at most {MAX_TEXT} characters.")
    return value


def _int_param(request: Request, key: str, default: int, *, low: int, high: int) -> int:
    raw = request.query_params.get(key)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise InvalidRequest(f"{key} must be an integer between {low} and {high}.") from None
    if not low <= value <= high:
        raise InvalidRequest(f"{key} must be an integer between {low} and {high}.")
    return value


def rest_routes(state: SimState, *, heartbeat_seconds: float) -> list[Route]:
    desk = state.desk

    async def health(request: Request) -> JSONResponse:
        return JSONResponse(health_summary(state.world))

    async def approvals_list(request: Request) -> JSONResponse:
        status = request.query_params.get("status", "pending")
        try:
            approvals = desk.approvals_list(status)
        except InvalidRequest as error:
            return _error(400, "invalid_request", str(error))
        return JSONResponse({"approvals": [approval.as_dict() for approval in approvals]})

    async def approval_detail(request: Request) -> JSONResponse:
        try:
            approval = desk.approval_get(request.path_params["approval_id"])
        except NotFound as error:
            return _error(404, "not_found", str(error))
        return JSONResponse(approval.as_dict())

    async def approval_decide(request: Request, *, approve: bool) -> JSONResponse:
        via = _actor(request)
        if via.startswith("agent:"):
            return _error(403, "forbidden", "Agents cannot decide approvals; an operator must.")
        try:
            body = await _json_object(request)
            reason = _optional_text(body, "reason")
        except InvalidRequest as error:
            return _error(400, "invalid_request", str(error))
        operator = body.get("operator")
        if not isinstance(operator, str) or not operator.strip():
            return _error(403, "operator_required", 'A decision needs the deciding operator: {"operator": "alice"}.')
        operator = operator.strip()
        if operator.startswith("agent:") or len(operator) > MAX_OPERATOR:
            return _error(403, "forbidden", f"{operator[:MAX_OPERATOR]!r} cannot decide approvals; an operator must.")
        try:
            approval = desk.decide(
                request.path_params["approval_id"], approve=approve, operator=operator, via=via, reason=reason
            )
        except NotFound as error:
            return _error(404, "not_found", str(error))
        except AlreadyDecided as error:
            return _error(409, "already_decided", str(error), decided_by=error.decided_by, status=error.status)
        execution = desk.execution_get(approval.execution_id)
        return JSONResponse(approval.as_dict() | {"execution": execution_detail(execution)})

    async def approve(request: Request) -> JSONResponse:
        return await approval_decide(request, approve=True)

    async def deny(request: Request) -> JSONResponse:
        return await approval_decide(request, approve=False)

    async def execution_create(request: Request) -> JSONResponse:
        try:
            body = await _json_object(request)
            target, action = body.get("target"), body.get("action")
            if not isinstance(target, str) or not isinstance(action, str):
                example = '{"target": "service:caddy", "action": "restart"}'
                raise InvalidRequest(f"target and action are required strings: {example}.")
            params = body.get("params")
            if params is not None and not isinstance(params, dict):
                raise InvalidRequest("params must be a JSON object.")
            execution = desk.request(
                target=target,
                action=action,
                requested_by=_requester(request, body),
                reason=_optional_text(body, "reason"),
                params=params,
            )
        except SimError as error:
            return _error(400, "invalid_request", str(error))
        return JSONResponse(execution_detail(execution), status_code=201)

    async def executions_list(request: Request) -> JSONResponse:
        # Newest first; `target` narrows to one entity (what an approval card shows as its history).
        try:
            limit = _int_param(request, "limit", 10, low=1, high=MAX_EXECUTIONS_LISTED)
        except InvalidRequest as error:
            return _error(400, "invalid_request", str(error))
        executions = desk.executions_recent(target=request.query_params.get("target", ""), limit=limit)
        return JSONResponse({"executions": [execution_detail(execution) for execution in executions]})

    async def entity_blast_radius(request: Request) -> JSONResponse:
        # The same walk as the MCP tool `get_blast_radius`: what breaks if this entity goes down.
        slug = request.path_params["slug"]
        try:
            depth = _int_param(request, "depth", 3, low=1, high=6)
            entries = blast_radius(state.world, slug, depth)
        except UnknownEntity as error:
            return _error(404, "not_found", str(error))
        except InvalidRequest as error:
            return _error(400, "invalid_request", str(error))
        return JSONResponse({"slug": slug, "depth": depth, "count": len(entries), "entries": entries})

    async def execution_get(request: Request) -> JSONResponse:
        try:
            execution = desk.execution_get(request.path_params["execution_id"])
        except NotFound as error:
            return _error(404, "not_found", str(error))
        return JSONResponse(execution_detail(execution))

    return [
        Route("/health", health, methods=["GET"]),
        Route("/approvals", approvals_list, methods=["GET"]),
        Route("/approvals/{approval_id}", approval_detail, methods=["GET"]),
        Route("/approvals/{approval_id}/approve", approve, methods=["POST"]),
        Route("/approvals/{approval_id}/deny", deny, methods=["POST"]),
        Route("/executions", execution_create, methods=["POST"]),
        Route("/executions", executions_list, methods=["GET"]),
        Route("/executions/{execution_id}", execution_get, methods=["GET"]),
        Route("/entities/{slug}/blast-radius", entity_blast_radius, methods=["GET"]),
        Route("/events", events_endpoint(state.events, heartbeat_seconds=heartbeat_seconds), methods=["GET"]),
    ]
