"""The in-memory world: every record Oikos would keep in its database, and the writes to it.

Reads may come from any thread (tests inspect it); writes happen under ``lock`` so ids stay unique
and lists stay consistent.
"""

from __future__ import annotations

import difflib
import threading
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from oikos_sim.clock import utc_now
from oikos_sim.errors import UnknownEntity
from oikos_sim.records import (
    ActivityEntry,
    AuditEntry,
    Entity,
    Health,
    KnowledgeDoc,
    Pattern,
    Relation,
    SecretRef,
    Severity,
    Signal,
    Skill,
    TimelineEvent,
)
from oikos_sim.seed.journal import PROFILES, journal_format, journal_generate

SLUG_EXAMPLES = "service:jellyfin, lxc:jellyfin, vm:truenas, host:pve1"
ACTIVITY_LIMIT = 2000


@dataclass
class World:
    anchor: datetime
    incident_since: datetime
    entities: dict[str, Entity]
    relations: list[Relation]
    docs: list[KnowledgeDoc]
    signals: list[Signal]
    patterns: list[Pattern]
    skills: list[Skill]
    audit: list[AuditEntry]
    timeline: list[TimelineEvent]
    activity: list[ActivityEntry]
    secrets: dict[str, list[SecretRef]]
    journal_extra: dict[str, list[tuple[datetime, str]]] = field(default_factory=dict)
    # A scenario's replacement for a service's routine journal lines (oikos_sim/scenarios.py).
    journal_routine: dict[str, tuple[str, ...]] = field(default_factory=dict)
    lock: threading.RLock = field(default_factory=threading.RLock)

    # -- lookups -------------------------------------------------------------------------------

    def entity_get(self, slug: str) -> Entity:
        """The entity for ``slug``, or ``UnknownEntity`` naming the closest slugs."""
        entity = self.entities.get(slug.strip())
        if entity is None:
            raise UnknownEntity(self._unknown_message(slug, self.entities))
        return entity

    def service_get(self, name_or_slug: str) -> Entity:
        """A service by bare name (``caddy``) or slug (``service:caddy``)."""
        name = name_or_slug.strip()
        slug = name if name.startswith("service:") else f"service:{name}"
        entity = self.entities.get(slug)
        if entity is None:
            services = {s: e for s, e in self.entities.items() if e.type == "service"}
            raise UnknownEntity(self._unknown_message(name_or_slug, services, what="service"))
        return entity

    def _unknown_message(self, given: str, candidates: dict[str, Entity], what: str = "entity") -> str:
        kind, _, bare = given.strip().lower().rpartition(":")
        names = sorted({entity.name for entity in candidates.values()})
        close = difflib.get_close_matches(bare, names, n=3, cutoff=0.7)
        if bare in names and bare not in close:
            close.insert(0, bare)
        # Same name first, and within a name the type the caller asked for first.
        suggestions = sorted(
            (slug for slug, entity in candidates.items() if entity.name in close),
            key=lambda slug: (close.index(candidates[slug].name), candidates[slug].type != kind, slug),
        )
        hint = f" Did you mean: {', '.join(suggestions[:4])}?" if suggestions else ""
        return f"Unknown {what} {given!r}.{hint} Slugs look like {SLUG_EXAMPLES}; list_entities shows them all."

    def guest_of(self, entity: Entity) -> Entity | None:
        """The LXC/VM a service runs on (or the entity itself when it is a guest)."""
        if entity.type in ("lxc", "vm"):
            return entity
        runs_on = entity.attrs.get("runs_on")
        return self.entities.get(runs_on) if isinstance(runs_on, str) else None

    def services_on(self, guest_slug: str) -> list[Entity]:
        return [e for e in self.entities.values() if e.type == "service" and e.attrs.get("runs_on") == guest_slug]

    # -- writes ------------------------------------------------------------------------------

    def audit_record(self, *, actor: str, action: str, target: str, detail: str, result: str) -> AuditEntry:
        with self.lock:
            entry = AuditEntry(f"aud-{len(self.audit) + 1:04d}", utc_now(), actor, action, target, detail, result)
            self.audit.append(entry)
            return entry

    def activity_record(
        self,
        *,
        actor: str,
        tool: str,
        arguments: dict[str, Any],
        is_error: bool,
        duration_ms: int,
        correlation_id: str | None = None,
    ) -> ActivityEntry:
        with self.lock:
            number = int(self.activity[-1].id.split("-")[1]) + 1 if self.activity else 1
            entry = ActivityEntry(
                f"act-{number:04d}", utc_now(), actor, tool, arguments, is_error, duration_ms, correlation_id
            )
            self.activity.append(entry)
            del self.activity[:-ACTIVITY_LIMIT]
            return entry

    def signal_fire(self, *, slug: str, kind: str, severity: Severity, summary: str) -> Signal:
        """Record a probe finding; a repeat of a firing (slug, kind) bumps its count instead."""
        with self.lock:
            now = utc_now()
            for signal in self.signals:
                if signal.slug == slug and signal.kind == kind and signal.state == "firing":
                    signal.count += 1
                    signal.last_seen = now
                    signal.summary = summary
                    signal.severity = severity
                    return signal
            signal = Signal(f"sig-{len(self.signals) + 1:04d}", slug, kind, severity, "firing", summary, now, now)
            self.signals.append(signal)
            return signal

    def signal_resolve(self, *, slug: str, kind: str) -> Signal | None:
        """Resolve the firing (slug, kind) signal; the signal, or None when none was firing."""
        with self.lock:
            for signal in self.signals:
                if signal.slug == slug and signal.kind == kind and signal.state == "firing":
                    signal.state = "resolved"
                    signal.last_seen = utc_now()
                    return signal
            return None

    def health_set(self, slug: str, health: Health, reason: str | None) -> tuple[Health, Health]:
        """Change an entity's health; returns (before, after)."""
        with self.lock:
            entity = self.entity_get(slug)
            before = entity.health
            entity.health = health
            entity.health_reason = reason
            entity.updated_at = utc_now()
            return before, health

    def journal_append(self, slug: str, texts: list[str]) -> None:
        """Add lines an execution wrote to a service's journal (formatted like journald)."""
        profile = PROFILES.get(slug)
        if profile is None:
            return
        with self.lock:
            now = utc_now()
            lines = self.journal_extra.setdefault(slug, [])
            lines.extend((now, journal_format(profile, now, text)) for text in texts)

    def journal_tail(self, slug: str, count: int, *, until: datetime | None = None) -> list[str]:
        """The last ``count`` journal lines of a service, oldest first."""
        until = until or utc_now()
        generated = journal_generate(
            slug, until=until, count=count, incident_since=self.incident_since, routine=self.journal_routine.get(slug)
        )
        with self.lock:
            extra = list(self.journal_extra.get(slug, []))
        merged = sorted(generated + extra, key=lambda pair: pair[0])
        return [line for _, line in merged[-count:]]
