"""Observe tools that look at a running service: its journal, its systemd state, a live probe."""

from __future__ import annotations

import zlib
from typing import Annotated

from mcp.server.mcpserver import MCPServer
from mcp_types import CallToolResult
from pydantic import Field

from oikos_sim.clock import utc_now
from oikos_sim.metrics import metric_latest
from oikos_sim.records import Entity
from oikos_sim.state import SimState
from oikos_sim.tools.base import READ_ONLY, ServiceName, guarded, json_result

Lines = Annotated[int, Field(description="How many journal lines (1-500), newest last.", ge=1, le=500)]
Grep = Annotated[str | None, Field(description="Only lines containing this text (case-insensitive).", max_length=200)]
_TLS_DAYS_LEFT = 61  # *.hubris.network was renewed two days before the world's anchor


def _started_at(state: SimState, service: Entity) -> object:
    guest = state.world.guest_of(service)
    return service.attrs.get("started_at") or (guest.attrs.get("started_at") if guest else None)


def register_runtime_tools(mcp: MCPServer, state: SimState) -> None:
    world = state.world

    @mcp.tool(annotations=READ_ONLY)
    @guarded
    async def tail_log(service: ServiceName, lines: Lines = 50, grep: Grep = None) -> CallToolResult:
        """Recent journald lines of a service (`journalctl -u <unit> -n <lines>`), oldest first.
        With grep, only matching lines among the last 2000."""
        entity = world.service_get(service)
        if grep:
            needle = grep.lower()
            matching = [line for line in world.journal_tail(entity.slug, 2000) if needle in line.lower()]
            selected = matching[-lines:]
        else:
            selected = world.journal_tail(entity.slug, lines)
        return json_result(
            {"service": entity.slug, "unit": entity.attrs["unit"], "count": len(selected), "lines": selected}
        )

    @mcp.tool(annotations=READ_ONLY)
    @guarded
    async def get_service_status(service: ServiceName) -> CallToolResult:
        """systemd state of a service (`systemctl show`): ActiveState, SubState, MainPID, start time,
        restarts, memory, plus version, where it runs and Oikos's health verdict."""
        entity = world.service_get(service)
        active = entity.state != "destroyed"
        pid = 200 + zlib.crc32(entity.slug.encode()) % 3000
        memory_mib = entity.attrs.get("memory_current_mib") or 40 + zlib.crc32(entity.name.encode()) % 900
        return json_result(
            {
                "service": entity.slug,
                "unit": entity.attrs["unit"],
                "ActiveState": "active" if active else "inactive",
                "SubState": "running" if active else "dead",
                "MainPID": pid if active else 0,
                "ExecMainStartTimestamp": _started_at(state, entity),
                "NRestarts": entity.attrs.get("restarts", 0),
                "MemoryCurrent": f"{memory_mib}.{pid % 10}M" if active else "0B",
                "UnitFileState": "enabled",
                "version": entity.version,
                "runs_on": entity.attrs["runs_on"],
                "health": entity.health,
                "health_reason": entity.health_reason,
            }
        )

    @mcp.tool(annotations=READ_ONLY)
    @guarded
    async def ping_service(service: ServiceName) -> CallToolResult:
        """Probe a service's endpoint now (HTTP(S), TCP or DNS, as Oikos's scheduler does): reachable,
        latency, HTTP status and, for HTTPS, days until the certificate expires."""
        entity = world.service_get(service)
        reachable = entity.state != "destroyed"
        protocol = entity.attrs["protocol"]
        result: dict[str, object] = {
            "service": entity.slug,
            "endpoint": entity.attrs.get("public_url") or entity.attrs["endpoint"],
            "protocol": protocol,
            "reachable": reachable,
            "latency_ms": metric_latest(world, entity.slug, "latency_ms") if reachable else None,
            "checked_at": utc_now(),
        }
        if protocol in ("http", "https") or "public_url" in entity.attrs:
            result["status_code"] = 200 if reachable else None
        if "public_url" in entity.attrs or protocol == "https":
            # One wildcard certificate fronts every public service; a scenario may bring its expiry near.
            result["tls_days_left"] = world.entities["service:caddy"].attrs.get("tls_days_left", _TLS_DAYS_LEFT)
        return json_result(result)
