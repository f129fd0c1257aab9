"""Walks over the relationship graph: who an entity needs, who needs it, and what breaks with it."""

from __future__ import annotations

from collections import deque
from typing import Any, Literal

from oikos_sim.errors import InvalidRequest
from oikos_sim.records import Relation
from oikos_sim.world import World

MAX_DEPTH = 6
Direction = Literal["out", "in", "both"]


def relations_of(world: World, slug: str, direction: Direction = "both") -> list[dict[str, Any]]:
    """Edges touching ``slug``.

    ``out``: what it runs on, depends on or is fronted by; ``in``: the reverse; ``both``: all.
    """
    world.entity_get(slug)
    edges = []
    for relation in world.relations:
        if direction in ("out", "both") and relation.source == slug:
            edges.append(_edge(relation, "out", relation.target))
        if direction in ("in", "both") and relation.target == slug:
            edges.append(_edge(relation, "in", relation.source))
    return edges


def _edge(relation: Relation, direction: str, other: str) -> dict[str, Any]:
    return {
        "direction": direction,
        "type": relation.type,
        "source": relation.source,
        "target": relation.target,
        "other": other,
        "note": relation.note,
    }


def dependants_direct(world: World, slug: str) -> list[Relation]:
    """Relations whose source stops working when ``slug`` does (every edge type carries the failure)."""
    return [relation for relation in world.relations if relation.target == slug]


def blast_radius(world: World, slug: str, depth: int = 3) -> list[dict[str, Any]]:
    """Everything that breaks if ``slug`` goes down, nearest first.

    A breadth-first walk against the edges (runs_on, depends_on, fronted_by), so each entity is
    reported once at its shortest distance. ``via`` spells the chain back to ``slug``, e.g.
    ``service:grafana depends_on service:authentik depends_on service:postgres``.
    """
    world.entity_get(slug)
    if not 1 <= depth <= MAX_DEPTH:
        raise InvalidRequest(f"depth must be between 1 and {MAX_DEPTH}, got {depth}.")
    seen = {slug}
    found: list[dict[str, Any]] = []
    queue: deque[tuple[str, int, str]] = deque([(slug, 0, slug)])
    while queue:
        current, level, path = queue.popleft()
        if level == depth:
            continue
        for relation in sorted(dependants_direct(world, current), key=lambda r: r.source):
            if relation.source in seen:
                continue
            seen.add(relation.source)
            via = f"{relation.source} {relation.type} {path}"
            dependant = world.entities[relation.source]
            found.append(
                {
                    "slug": relation.source,
                    "depth": level + 1,
                    "via": via,
                    "type": dependant.type,
                    "health": dependant.health,
                }
            )
            queue.append((relation.source, level + 1, via))
    return found
