"""Assembles the seeded world: the same homelab on every start, anchored at the start time."""

from __future__ import annotations

from datetime import datetime

from oikos_sim.seed.fleet import archive_failure_started, fleet_entities, fleet_relations
from oikos_sim.seed.history import (
    seed_activity,
    seed_audit,
    seed_patterns,
    seed_secrets,
    seed_signals,
    seed_skills,
    seed_timeline,
)
from oikos_sim.seed.knowledge import knowledge_docs
from oikos_sim.world import World


def world_seed(anchor: datetime) -> World:
    """Build the world as it stands at ``anchor``; relative timestamps hang off it."""
    return World(
        anchor=anchor,
        incident_since=archive_failure_started(anchor),
        entities=fleet_entities(anchor),
        relations=fleet_relations(),
        docs=knowledge_docs(anchor),
        signals=seed_signals(anchor),
        patterns=seed_patterns(anchor),
        skills=seed_skills(),
        audit=seed_audit(anchor),
        timeline=seed_timeline(anchor),
        activity=seed_activity(anchor),
        secrets=seed_secrets(anchor),
    )
