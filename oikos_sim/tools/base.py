"""What every tool module shares: argument types, the JSON result shape, the caller's actor and the
translation of domain errors into tool errors a model can act on."""

from __future__ import annotations

import functools
import json
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, ParamSpec

from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field

from oikos_sim.auth import ACTOR_SCOPE_KEY
from oikos_sim.errors import SimError
from oikos_sim.records import jsonable

READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)

Slug = Annotated[
    str,
    Field(
        description="Entity slug <type>:<name>, e.g. service:jellyfin, lxc:jellyfin, vm:truenas, host:pve1.",
        min_length=3,
        max_length=120,
    ),
]
ServiceName = Annotated[
    str,
    Field(description="Service name or slug, e.g. caddy or service:caddy.", min_length=1, max_length=120),
]
SlugFilter = Annotated[
    str | None,
    Field(description="Only entries about this entity slug, e.g. service:postgres.", max_length=120),
]
HostFilter = Annotated[
    str | None, Field(description="Only what is placed on this Proxmox node, e.g. host:pve3.", max_length=120)
]
ActorFilter = Annotated[
    str | None,
    Field(description="Only entries by this actor, e.g. agent:hermes or operator:alice.", max_length=120),
]
Limit = Annotated[int, Field(description="Maximum number of entries to return.", ge=1, le=500)]

P = ParamSpec("P")


def json_result(payload: dict[str, Any]) -> CallToolResult:
    """A tool answer: the JSON object as structured content, and the same JSON as text."""
    data = jsonable(payload)
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=data)


def actor_of(ctx: Context) -> str:
    """The actor the caller's bearer token maps to (set by the auth middleware)."""
    request = ctx.request_context.request
    actor = request.scope.get(ACTOR_SCOPE_KEY) if request is not None else None
    if not isinstance(actor, str):
        raise ToolError("This call carries no authenticated actor; send Authorization: Bearer <token>.")
    return actor


def guarded(fn: Callable[P, Awaitable[CallToolResult]]) -> Callable[P, Awaitable[CallToolResult]]:
    """Turn domain refusals into ``ToolError`` so their message (not a generic one) reaches the model."""

    @functools.wraps(fn)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> CallToolResult:
        try:
            return await fn(*args, **kwargs)
        except SimError as error:
            raise ToolError(str(error)) from error

    return wrapper
