"""Observe tools over the inventory: entities, relations, blast radius, health and guests."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from mcp.server.mcpserver import MCPServer
from mcp_types import CallToolResult
from pydantic import Field

from oikos_sim.clock import iso, utc_now
from oikos_sim.errors import UnknownEntity
from oikos_sim.graph import MAX_DEPTH, blast_radius, relations_of
from oikos_sim.health import health_summary
from oikos_sim.metrics import metric_latest, metric_specs
from oikos_sim.records import Entity, jsonable
from oikos_sim.state import SimState
from oikos_sim.tools.base import READ_ONLY, HostFilter, Slug, guarded, json_result

EntityKind = Annotated[Literal["host", "lxc", "vm", "service"] | None, Field(description="Only entities of this type.")]
HealthFilter = Annotated[
    Literal["healthy", "degraded", "down"] | None, Field(description="Only entities with this health.")
]
Direction = Annotated[
    Literal["out", "in", "both"],
    Field(description="out: what it needs; in: what needs it or runs on it; both (default)."),
]
IncludeVms = Annotated[bool, Field(description="Also list the VMs (Home Assistant OS, TrueNAS, PBS).")]
Depth = Annotated[int, Field(description="How many hops to follow (1-6).", ge=1, le=MAX_DEPTH)]
GuestRef = Annotated[
    str,
    Field(description="Guest slug (lxc:caddy, vm:truenas), bare name (caddy) or VMID (101).", min_length=1),
]


def _row(entity: Entity) -> dict[str, Any]:
    return {
        "slug": entity.slug,
        "type": entity.type,
        "name": entity.name,
        "state": entity.state,
        "health": entity.health,
        "version": entity.version,
        "on": entity.attrs.get("runs_on") or entity.attrs.get("host"),
    }


def register_inventory_tools(mcp: MCPServer, state: SimState) -> None:
    world = state.world

    @mcp.tool(annotations=READ_ONLY)
    @guarded
    async def get_entity(slug: Slug) -> CallToolResult:
        """Full record of one entity (host, lxc, vm or service): state, health and its reason, version,
        disk usage, config drift, attributes (VMID, IP, unit, endpoint...) and its metric names."""
        entity = world.entity_get(slug)
        return json_result(jsonable(entity) | {"metrics": sorted(metric_specs(entity))})

    @mcp.tool(annotations=READ_ONLY)
    @guarded
    async def list_entities(
        type: EntityKind = None, health: HealthFilter = None, host: HostFilter = None
    ) -> CallToolResult:
        """List entities, optionally only one type, one health, or those placed on one Proxmox host
        (host:pve1). Each row: slug, type, name, state, health, version and what it runs on."""
        if host is not None:
            world.entity_get(host)
        rows = []
        for entity in world.entities.values():
            if (type and entity.type != type) or (health and entity.health != health):
                continue
            if host:
                guest = world.guest_of(entity)
                placed = guest.attrs.get("host") if guest else entity.slug
                if placed != host:
                    continue
            rows.append(_row(entity))
        return json_result({"count": len(rows), "entities": rows})

    @mcp.tool(annotations=READ_ONLY)
    @guarded
    async def get_relations(slug: Slug, direction: Direction = "both") -> CallToolResult:
        """Direct relationships of an entity. out: what it runs_on / depends_on / is fronted_by;
        in: what runs on it, depends on it or is fronted by it."""
        return json_result({"slug": slug, "relations": relations_of(world, slug, direction)})

    @mcp.tool(annotations=READ_ONLY)
    @guarded
    async def get_blast_radius(slug: Slug, depth: Depth = 3) -> CallToolResult:
        """What breaks if this entity goes down: every dependant up to `depth` hops, nearest first.
        Each entry has slug, depth (1 = direct) and via (the relationship chain back to the entity)."""
        entries = blast_radius(world, slug, depth)
        by_depth: dict[str, list[str]] = {}
        for entry in entries:
            by_depth.setdefault(str(entry["depth"]), []).append(entry["slug"])
        return json_result(
            {"slug": slug, "depth": depth, "count": len(entries), "by_depth": by_depth, "entries": entries}
        )

    @mcp.tool(annotations=READ_ONLY)
    @guarded
    async def explain(slug: Slug) -> CallToolResult:
        """Compact context card for an entity: what it is, where it runs, its health and why, what it
        depends on, what depends on it, open signals and the last change. Start here before acting."""
        entity = world.entity_get(slug)
        relations = relations_of(world, slug, "both")
        last_change = next((a for a in reversed(world.audit) if a.target == slug), None)
        card = {
            "slug": entity.slug,
            "type": entity.type,
            "what": entity.description,
            "state": entity.state,
            "health": entity.health,
            "health_reason": entity.health_reason,
            "version": entity.version,
            "runs_on": [r["target"] for r in relations if r["direction"] == "out" and r["type"] == "runs_on"],
            "depends_on": [r["target"] for r in relations if r["direction"] == "out" and r["type"] == "depends_on"],
            "fronted_by": [r["target"] for r in relations if r["direction"] == "out" and r["type"] == "fronted_by"],
            "dependants": [r["source"] for r in relations if r["direction"] == "in"],
            "blast_radius_size": len(blast_radius(world, slug, 3)),
            "disk_pct": entity.disk_pct,
            "drift_count": entity.drift_count,
            "open_signals": [
                f"{s.severity}: {s.summary}" for s in world.signals if s.slug == slug and s.state == "firing"
            ],
            "last_change": jsonable(last_change) if last_change else None,
            "updated_at": entity.updated_at,
        }
        return json_result(card)

    @mcp.tool(annotations=READ_ONLY)
    @guarded
    async def get_state_snapshot() -> CallToolResult:
        """Fleet-wide snapshot, one row per entity: slug, type, health, disk usage % and config drift
        count."""
        rows = [
            {
                "slug": e.slug,
                "type": e.type,
                "health": e.health,
                "disk_pct": e.disk_pct,
                "drift_count": e.drift_count,
            }
            for e in world.entities.values()
        ]
        return json_result({"taken_at": utc_now(), "count": len(rows), "entities": rows})

    @mcp.tool(annotations=READ_ONLY)
    @guarded
    async def get_health_summary() -> CallToolResult:
        """Fleet health at a glance: counts of healthy/degraded/down entities and, for every entity that
        is not healthy, its slug, health and the reason. Use this first for "what's wrong?"."""
        summary = health_summary(world)
        if summary["degraded"]:
            worst = summary["degraded"][0]["slug"]
            summary["next_step"] = f"get_blast_radius(slug='{worst}') shows what depends on {worst}."
        return json_result(summary)

    @mcp.tool(annotations=READ_ONLY)
    @guarded
    async def list_lxcs(host: HostFilter = None, include_vms: IncludeVms = False) -> CallToolResult:
        """All LXC containers (and VMs with include_vms) with VMID, Proxmox host, status, cores, memory,
        disk usage and the services they run. Filter by host, e.g. host:pve3."""
        if host is not None:
            world.entity_get(host)
        kinds = ("lxc", "vm") if include_vms else ("lxc",)
        rows = []
        for guest in sorted(world.entities.values(), key=lambda e: e.attrs.get("vmid", 0)):
            if guest.type not in kinds or (host and guest.attrs["host"] != host):
                continue
            rows.append(
                {
                    "slug": guest.slug,
                    "vmid": guest.attrs["vmid"],
                    "host": guest.attrs["host"],
                    "status": guest.state,
                    "health": guest.health,
                    "cores": guest.attrs["cores"],
                    "memory_mib": guest.attrs["memory_mib"],
                    "disk_pct": guest.disk_pct,
                    "services": [s.slug for s in world.services_on(guest.slug)],
                }
            )
        return json_result({"count": len(rows), "guests": rows})

    @mcp.tool(annotations=READ_ONLY)
    @guarded
    async def get_lxc_state(lxc: GuestRef) -> CallToolResult:
        """Live resource state of one container or VM, like `pct status <vmid> --verbose`: status, CPU,
        memory, disk, uptime, network counters, HA state and its services."""
        guest = _guest_find(state, lxc)
        now = utc_now()
        uptime = int((now - guest.attrs["started_at"]).total_seconds()) if guest.state == "running" else 0
        mem_pct = metric_latest(world, guest.slug, "mem_pct")
        return json_result(
            {
                "slug": guest.slug,
                "vmid": guest.attrs["vmid"],
                "host": guest.attrs["host"],
                "status": guest.state,
                "cpus": guest.attrs["cores"],
                "cpu_pct": metric_latest(world, guest.slug, "cpu_pct"),
                "maxmem_mib": guest.attrs["memory_mib"],
                "mem_mib": round(guest.attrs["memory_mib"] * mem_pct / 100),
                "maxdisk_gib": guest.attrs["disk_gib"],
                "disk_gib": guest.attrs["disk_used_gib"],
                "disk_pct": guest.disk_pct,
                "uptime_s": uptime,
                "netin_mb": round(uptime * metric_latest(world, guest.slug, "net_rx_mbps") / 8 / 40),
                "netout_mb": round(uptime * metric_latest(world, guest.slug, "net_tx_mbps") / 8 / 40),
                "ha_state": "started" if guest.attrs["host"] != "host:pve3" else "ignored",
                "os": guest.attrs["os"],
                "ip": guest.attrs["ip"],
                "services": [s.slug for s in world.services_on(guest.slug)],
                "checked_at": iso(now),
            }
        )


def _guest_find(state: SimState, ref: str) -> Entity:
    world = state.world
    ref = ref.strip()
    guests = [e for e in world.entities.values() if e.type in ("lxc", "vm")]
    for guest in guests:
        if ref in (guest.slug, guest.name, str(guest.attrs["vmid"])):
            return guest
    vmids = ", ".join(f"{g.attrs['vmid']}={g.slug}" for g in sorted(guests, key=lambda g: g.attrs["vmid"]))
    if ref.startswith(("service:", "host:")):
        raise UnknownEntity(f"{ref!r} is not a container or VM. Guests: {vmids}.")
    raise UnknownEntity(f"Unknown container {ref!r}. Guests (VMID=slug): {vmids}.")
