"""What the actuator does when an execution runs: the output it prints and what changes in the world.

Outcomes follow the world, not chance: a deploy or config change onto a guest whose disk is 90 %
full fails with ENOSPC (that is postgres today); a deploy of a version the entity lists in
`bad_versions` succeeds but leaves it degraded, until a rollback (oikos_sim/scenarios.py);
a restart heals what `restart_clears` says a restart heals; everything else succeeds.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from oikos_sim.clock import utc_now
from oikos_sim.records import Entity, Health
from oikos_sim.world import World

DISK_FULL_PCT = 90.0


@dataclass
class Outcome:
    ok: bool
    output: list[str]
    error: str | None = None
    health: tuple[Health, str | None] | None = None
    journal: list[str] = field(default_factory=list)


def procedure_run(world: World, *, target: str, action: str, params: dict[str, Any]) -> Outcome:
    """Carry out ``action`` on ``target`` in the world and report what happened."""
    entity = world.entity_get(target)
    runner = _PROCEDURES[action]
    with world.lock:
        return runner(world, entity, params)


def _unit(entity: Entity) -> str:
    return str(entity.attrs.get("unit", f"{entity.name}.service"))


def _restart(world: World, entity: Entity, params: dict[str, Any]) -> Outcome:
    if entity.type == "service":
        unit = _unit(entity)
        entity.attrs["started_at"] = utc_now()
        entity.attrs["restarts"] = int(entity.attrs.get("restarts", 0)) + 1
        journal = [f"Stopping {unit}...", f"{unit}: Deactivated successfully.", f"Started {unit}."]
        output = [
            f"$ systemctl restart {unit}",
            f"{unit}: active (running)",
            f"probe {entity.attrs['endpoint']}: ok",
        ]
        outcome = Outcome(True, output, journal=[f"systemd[1]: {line}" for line in journal])
    elif entity.type in ("lxc", "vm"):
        tool = "pct" if entity.type == "lxc" else "qm"
        vmid = entity.attrs["vmid"]
        entity.attrs["started_at"] = utc_now()
        outcome = Outcome(
            True, [f"$ {tool} reboot {vmid} --timeout 60", f"{entity.slug} (vmid {vmid}): status running"]
        )
    else:
        entity.attrs["booted_at"] = utc_now()
        outcome = Outcome(True, [f"$ ssh root@{entity.attrs['fqdn']} systemctl reboot", "node back, quorum OK"])
    if entity.health != "healthy" and entity.attrs.pop("restart_clears", False):
        outcome.health = ("healthy", None)
    return outcome


def _reload(world: World, entity: Entity, params: dict[str, Any]) -> Outcome:
    unit = _unit(entity)
    return Outcome(
        True,
        [f"$ systemctl reload {unit}", f"{unit}: reloaded, active (running)"],
        journal=[f"systemd[1]: Reloading {unit}...", f"systemd[1]: Reloaded {unit}."],
    )


def _ping(world: World, entity: Entity, params: dict[str, Any]) -> Outcome:
    endpoint = entity.attrs.get("endpoint") or entity.attrs.get("ip") or entity.attrs.get("fqdn")
    return Outcome(True, [f"probe {endpoint}: reachable"])


def _disk_full(world: World, entity: Entity) -> Entity | None:
    guest = world.guest_of(entity)
    return guest if guest is not None and (guest.disk_pct or 0) >= DISK_FULL_PCT else None


def _deploy(world: World, entity: Entity, params: dict[str, Any]) -> Outcome:
    full = _disk_full(world, entity)
    if full is not None:
        error = (
            f"No space left on device: {full.slug} disk is {full.disk_pct}% full "
            f"({full.attrs['disk_used_gib']} of {full.attrs['disk_gib']} GiB)"
        )
        return Outcome(False, [f"$ pct snapshot {full.attrs['vmid']} pre-deploy", f"error: {error}"], error)
    version = str(params.get("version") or entity.version or "current")
    output = []
    guest = world.guest_of(entity)
    if guest is not None:
        output.append(f"$ pct snapshot {guest.attrs['vmid']} pre-deploy-{version}")
    if entity.version and version != entity.version:
        entity.attrs["previous_version"] = entity.version
        entity.version = version
    entity.updated_at = utc_now()
    journal = [f"systemd[1]: Started {_unit(entity)} ({entity.name} {version})."]
    broken = entity.attrs.get("bad_versions", {}).get(version)
    if broken:
        # The install itself succeeds: only the health check after it shows the release is bad.
        entity.attrs["degraded_by_deploy"] = True
        entity.attrs.pop("restart_clears", None)
        output += [f"installed {entity.name} {version}", "migrations: applied", f"health check: degraded ({broken})"]
        return Outcome(True, output, health=("degraded", broken), journal=journal)
    output += [f"installed {entity.name} {version}", "migrations: none pending", "health check: ok"]
    return Outcome(True, output, journal=journal)


def _config(world: World, entity: Entity, params: dict[str, Any]) -> Outcome:
    full = _disk_full(world, entity)
    if full is not None:
        error = f"No space left on device writing the new configuration to {full.slug}"
        return Outcome(False, [f"error: {error}"], error)
    entity.drift_count = 0
    entity.updated_at = utc_now()
    changes = ", ".join(f"{key}={value}" for key, value in sorted(params.items())) or "rendered from git"
    return Outcome(True, [f"config for {entity.slug}: {changes}", "validated, applied, reloaded"])


def _rollback(world: World, entity: Entity, params: dict[str, Any]) -> Outcome:
    previous = entity.attrs.pop("previous_version", None)
    output = []
    guest = world.guest_of(entity)
    if guest is not None:
        output.append(f"$ pct rollback {guest.attrs['vmid']} pre-deploy")
    if previous:
        entity.version = str(previous)
        output.append(f"{entity.name} back at {previous}")
    entity.updated_at = utc_now()
    healed: tuple[Health, str | None] | None = None
    if entity.attrs.pop("degraded_by_deploy", False):
        healed = ("healthy", None)
    return Outcome(True, [*output, "health check: ok"], health=healed)


def _destroy(world: World, entity: Entity, params: dict[str, Any]) -> Outcome:
    entity.state = "destroyed"
    entity.updated_at = utc_now()
    vmid = entity.attrs.get("vmid")
    step = f"$ pct destroy {vmid} --purge" if vmid else f"removed {entity.slug}"
    return Outcome(True, [f"$ pct stop {vmid}" if vmid else "stopped", step], health=("down", "destroyed on request"))


_PROCEDURES = {
    "restart": _restart,
    "reload": _reload,
    "ping": _ping,
    "deploy": _deploy,
    "config": _config,
    "rollback": _rollback,
    "destroy": _destroy,
    "wipe": _destroy,
}
