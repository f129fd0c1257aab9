"""The seeded homelab: the same on every start, the promised size, and internally consistent."""

from __future__ import annotations

from datetime import UTC, datetime

from oikos_sim.metrics import metric_specs
from oikos_sim.records import jsonable
from oikos_sim.seed.homelab import world_seed
from oikos_sim.seed.journal import PROFILES

ANCHOR = datetime(2026, 11, 27, 21, 40, tzinfo=UTC)


def test_every_start_seeds_the_same_homelab() -> None:
    first, second = world_seed(ANCHOR), world_seed(ANCHOR)
    assert jsonable(first.entities) == jsonable(second.entities)
    assert first.relations == second.relations
    assert first.journal_tail("service:postgres", 30, until=ANCHOR) == second.journal_tail(
        "service:postgres", 30, until=ANCHOR
    )


def test_the_homelab_has_the_promised_size() -> None:
    world = world_seed(ANCHOR)
    kinds = [entity.type for entity in world.entities.values()]
    assert kinds.count("host") >= 3
    assert kinds.count("lxc") + kinds.count("vm") >= 10
    assert kinds.count("service") >= 12
    assert len(world.docs) >= 10
    assert {"caddy", "jellyfin", "authentik", "gitea", "postgres"} <= {
        e.name for e in world.entities.values() if e.type == "service"
    }


def test_relations_logs_and_metrics_cover_every_entity() -> None:
    world = world_seed(ANCHOR)
    for relation in world.relations:
        assert {relation.source, relation.target} <= set(world.entities), relation
    for entity in world.entities.values():
        assert metric_specs(entity), entity.slug
        if entity.type == "service":
            assert entity.slug in PROFILES, entity.slug
            assert world.entity_get(entity.attrs["runs_on"]).type in ("lxc", "vm")
        if entity.type in ("lxc", "vm"):
            assert world.entity_get(entity.attrs["host"]).type == "host"


def test_the_postgres_journal_shows_the_failure_only_after_it_began() -> None:
    world = world_seed(ANCHOR)
    before = world.journal_tail("service:postgres", 20, until=world.incident_since)
    after = world.journal_tail("service:postgres", 20, until=ANCHOR)
    assert not any("archive command failed" in line for line in before[:-1])
    assert sum("archive command failed" in line for line in after) >= 4
    assert after[-1].startswith("Nov 27 21:")
