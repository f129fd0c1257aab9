"""Tools over what happened: changes, the audit log, the event timeline, signals, agent activity."""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import MCPServer
from mcp_types import CallToolResult
from pydantic import Field

from oikos_sim.clock import utc_now
from oikos_sim.records import TimelineEvent, jsonable
from oikos_sim.state import SimState
from oikos_sim.tools.base import READ_ONLY, ActorFilter, Limit, Slug, SlugFilter, guarded, json_result

SignalState = Annotated[
    Literal["firing", "resolved"] | None,
    Field(description="Only signals that are still firing, or resolved."),
]
ToolFilter = Annotated[str | None, Field(description="Only calls of this tool, e.g. request_execution.")]
CorrelationFilter = Annotated[
    str | None,
    Field(description="Only calls made under this correlation id (a Hermes turn id).", max_length=100),
]
SinceMinutes = Annotated[int, Field(description="Look back this many minutes (max 7 days).", ge=1, le=10080)]


def _timeline(state: SimState) -> list[TimelineEvent]:
    """The seeded history followed by everything the live event stream still holds."""
    live = []
    for event in state.events.recent(1000):
        data = event.data
        slug = str(data.get("slug") or data.get("target") or "")
        summary = data.get("message") or data.get("summary")
        if event.type.startswith("approval."):
            summary = f"{data['approval_id']} {data['status']}: {data['action']} of {data['target']}"
        elif event.type == "entity.health_changed":
            summary = f"{data['from']} -> {data['to']}" + (f": {data['reason']}" if data.get("reason") else "")
        live.append(TimelineEvent(event.at, event.type, slug, str(summary)))
    return sorted([*state.world.timeline, *live], key=lambda e: e.at)


def register_history_tools(mcp: MCPServer, state: SimState) -> None:
    world = state.world

    @mcp.tool(annotations=READ_ONLY)
    @guarded
    async def get_change_history(slug: Slug, limit: Limit = 20) -> CallToolResult:
        """Changes made to one entity (deploys, config changes, restarts, decisions), newest first. For a
        container or VM this includes changes to the services it runs."""
        entity = world.entity_get(slug)
        related = {slug} | {s.slug for s in world.services_on(slug)} if entity.type in ("lxc", "vm") else {slug}
        entries = [a for a in reversed(world.audit) if a.target in related][:limit]
        return json_result({"slug": slug, "count": len(entries), "changes": jsonable(entries)})

    @mcp.tool(annotations=READ_ONLY)
    @guarded
    async def get_audit_trail(
        actor: ActorFilter = None, target: SlugFilter = None, limit: Limit = 50
    ) -> CallToolResult:
        """The audit log of every mutation and decision, newest first: who (actor), what (action, target),
        detail and result. Filter by actor (agent:hermes, operator:alice) or target slug."""
        entries = [
            a
            for a in reversed(world.audit)
            if (actor is None or a.actor == actor) and (target is None or a.target == target)
        ][:limit]
        return json_result({"count": len(entries), "entries": jsonable(entries)})

    @mcp.tool(annotations=READ_ONLY)
    @guarded
    async def get_event_timeline(
        slug: SlugFilter = None, since_minutes: SinceMinutes = 1440, limit: Limit = 100
    ) -> CallToolResult:
        """What happened when, oldest first: signals, health changes, approvals and executions over the
        last since_minutes (default 24 h), optionally for one entity slug."""
        if slug is not None:
            world.entity_get(slug)
        cutoff = utc_now() - timedelta(minutes=since_minutes)
        events = [e for e in _timeline(state) if e.at >= cutoff and (slug is None or e.slug == slug)]
        return json_result({"count": len(events[-limit:]), "events": jsonable(events[-limit:])})

    @mcp.tool(annotations=READ_ONLY)
    @guarded
    async def get_signal_history(
        slug: SlugFilter = None, status: SignalState = None, limit: Limit = 50
    ) -> CallToolResult:
        """Signals from Oikos's probes (disk, WAL archiving, HTTP timeouts, certificates, drift), newest
        first, deduplicated with a count. Filter by entity slug and by firing/resolved."""
        if slug is not None:
            world.entity_get(slug)
        signals = sorted(world.signals, key=lambda s: s.last_seen, reverse=True)
        selected = [s for s in signals if (slug is None or s.slug == slug) and (status is None or s.state == status)][
            :limit
        ]
        return json_result({"count": len(selected), "signals": jsonable(selected)})

    @mcp.tool(annotations=READ_ONLY)
    @guarded
    async def get_agent_activity(
        actor: ActorFilter = None,
        tool: ToolFilter = None,
        correlation_id: CorrelationFilter = None,
        limit: Limit = 50,
    ) -> CallToolResult:
        """The ledger of MCP tool calls made against Oikos (by Hermes and other agents), newest first:
        actor, tool, arguments, error flag, duration, and the caller's correlation id (Hermes's turn
        id) when it sent one."""
        entries: list[Any] = [
            a
            for a in reversed(world.activity)
            if (actor is None or a.actor == actor)
            and (tool is None or a.tool == tool)
            and (correlation_id is None or a.correlation_id == correlation_id)
        ][:limit]
        return json_result({"count": len(entries), "activity": jsonable(entries)})
