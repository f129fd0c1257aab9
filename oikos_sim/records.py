"""The record types the simulated Oikos database holds, and their JSON form."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from oikos_sim.clock import iso

EntityType = Literal["host", "lxc", "vm", "service"]
Health = Literal["healthy", "degraded", "down"]
Severity = Literal["info", "warning", "critical"]


def jsonable(value: Any) -> Any:
    """Turn records, datetimes and containers into plain JSON values."""
    if isinstance(value, datetime):
        return iso(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(key): jsonable(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(item) for item in value]
    return value


@dataclass
class Entity:
    """One thing Oikos tracks: a Proxmox host, a guest (LXC or VM) or a service."""

    slug: str
    type: EntityType
    name: str
    description: str
    state: str
    health: Health
    health_reason: str | None
    version: str | None
    updated_at: datetime
    disk_pct: float | None = None
    drift_count: int = 0
    attrs: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Relation:
    """``source`` runs_on / depends_on / fronted_by ``target``: when target breaks, source suffers."""

    source: str
    type: Literal["runs_on", "depends_on", "fronted_by"]
    target: str
    note: str = ""


@dataclass(frozen=True)
class KnowledgeDoc:
    id: str
    title: str
    kind: Literal["runbook", "doc", "adr", "postmortem"]
    tags: tuple[str, ...]
    entities: tuple[str, ...]
    updated_at: datetime
    body: str


@dataclass
class Signal:
    """A deduplicated probe finding (disk, http, certificate, backup, ...)."""

    id: str
    slug: str
    kind: str
    severity: Severity
    state: Literal["firing", "resolved"]
    summary: str
    first_seen: datetime
    last_seen: datetime
    count: int = 1


@dataclass(frozen=True)
class Pattern:
    id: str
    title: str
    description: str
    entities: tuple[str, ...]
    confidence: float
    occurrences: int
    last_seen: datetime
    suggested_action: str


@dataclass(frozen=True)
class Skill:
    name: str
    description: str
    actions: tuple[str, ...]
    target_types: tuple[str, ...]
    risk_class: str
    steps: tuple[str, ...]
    runs_30d: int
    success_rate: float


@dataclass(frozen=True)
class AuditEntry:
    id: str
    at: datetime
    actor: str
    action: str
    target: str
    detail: str
    result: str


@dataclass(frozen=True)
class TimelineEvent:
    at: datetime
    type: str
    slug: str
    summary: str


@dataclass(frozen=True)
class ActivityEntry:
    """One MCP tool call made against Oikos, as the agent-activity ledger keeps it."""

    id: str
    at: datetime
    actor: str
    tool: str
    arguments: dict[str, Any]
    is_error: bool
    duration_ms: int
    # The caller's correlation id, sent in the request's `_meta` (Hermes: its turn id).
    correlation_id: str | None = None


@dataclass(frozen=True)
class SecretRef:
    """A secret's name and where it lives. Values never enter the simulation."""

    name: str
    path: str
    used_by: str
    last_rotated: datetime
