"""Orient tools over what the homelab has learned: runbooks, recurring patterns, known procedures."""

from __future__ import annotations

from typing import Annotated, Literal

from mcp.server.mcpserver import MCPServer
from mcp_types import CallToolResult
from pydantic import Field

from oikos_sim.policy import action_normalize
from oikos_sim.records import jsonable
from oikos_sim.search import knowledge_search
from oikos_sim.state import SimState
from oikos_sim.tools.base import READ_ONLY, SlugFilter, guarded, json_result

Query = Annotated[
    str,
    Field(description="Words to search for, e.g. 'postgres wal archive disk'.", min_length=1, max_length=300),
]
DocKind = Annotated[
    Literal["runbook", "doc", "adr", "postmortem"] | None, Field(description="Only documents of this kind.")
]
ActionFilter = Annotated[
    str | None, Field(description="Only procedures for this action, e.g. restart or deploy.", max_length=40)
]
TopN = Annotated[int, Field(description="How many documents to return (1-20).", ge=1, le=20)]


def register_knowledge_tools(mcp: MCPServer, state: SimState) -> None:
    world = state.world

    @mcp.tool(annotations=READ_ONLY)
    @guarded
    async def search_knowledge(query: Query, limit: TopN = 5, kind: DocKind = None) -> CallToolResult:
        """Ranked full-text search over runbooks, docs and postmortems. Each hit has a score, the most
        relevant line and the full body, so the best runbook can be followed directly."""
        hits = knowledge_search(world.docs, query, limit=limit, kind=kind)
        return json_result({"query": query, "count": len(hits), "results": hits})

    @mcp.tool(annotations=READ_ONLY)
    @guarded
    async def get_patterns(slug: SlugFilter = None) -> CallToolResult:
        """Recurring patterns Oikos has learned from past incidents (with confidence, occurrences and a
        suggested action), optionally only those involving one entity slug."""
        if slug is not None:
            world.entity_get(slug)
        patterns = [p for p in world.patterns if slug is None or slug in p.entities]
        return json_result({"count": len(patterns), "patterns": jsonable(patterns)})

    @mcp.tool(annotations=READ_ONLY)
    @guarded
    async def get_skills(action: ActionFilter = None) -> CallToolResult:
        """Procedures the actuator knows (what request_execution will run): the actions and target types
        each handles, its risk class, its steps and its recent success rate. Filter by action, e.g. deploy."""
        verb = action_normalize(action) if action is not None else None
        skills = [s for s in world.skills if verb is None or verb in s.actions]
        return json_result({"count": len(skills), "skills": jsonable(skills)})
