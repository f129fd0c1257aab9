"""Tools over metric time series: raw samples and trends."""

from __future__ import annotations

from typing import Annotated

from mcp.server.mcpserver import MCPServer
from mcp_types import CallToolResult
from pydantic import Field

from oikos_sim.metrics import metric_series, metric_trend
from oikos_sim.state import SimState
from oikos_sim.tools.base import READ_ONLY, Slug, guarded, json_result

Metric = Annotated[
    str,
    Field(
        description="Metric name, e.g. disk_pct, cpu_pct, mem_pct, latency_ms, wal_size_gib; "
        "get_entity lists an entity's metrics.",
        min_length=1,
        max_length=60,
    ),
]
SinceMinutes = Annotated[int, Field(description="Window in minutes (5 to 10080 = 7 days).", ge=5, le=10080)]
StepMinutes = Annotated[int, Field(description="Sample spacing in minutes, a multiple of 5.", ge=5, le=1440)]
WindowHours = Annotated[int, Field(description="Window in hours (1-168).", ge=1, le=168)]


def register_metric_tools(mcp: MCPServer, state: SimState) -> None:
    world = state.world

    @mcp.tool(annotations=READ_ONLY)
    @guarded
    async def query_metrics(
        slug: Slug, metric: Metric, since_minutes: SinceMinutes = 60, step_minutes: StepMinutes = 5
    ) -> CallToolResult:
        """Samples of one metric for one entity as [timestamp, value] pairs, oldest first (scraped every
        5 minutes). At most 500 points: widen step_minutes for long windows."""
        return json_result(metric_series(world, slug, metric, since_minutes=since_minutes, step_minutes=step_minutes))

    @mcp.tool(annotations=READ_ONLY)
    @guarded
    async def get_trend(slug: Slug, metric: Metric, window_hours: WindowHours = 24) -> CallToolResult:
        """Trend of one metric over a window: first/last/min/max/mean, slope per hour and direction
        (rising/falling/flat); for a rising percentage, hours until it reaches 100 %."""
        return json_result(metric_trend(world, slug, metric, window_hours=window_hours))
