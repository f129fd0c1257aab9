"""The seeded homelab: three Proxmox hosts, their guests, the services on them and how they relate.

The story the fleet tells: the Proxmox Backup Server datastore filled up overnight, PostgreSQL's
WAL archiving to it started failing, and ``pg_wal`` has been eating the database disk since. So
``service:postgres`` is degraded, and everything that keeps its state in it (authentik, gitea,
vaultwarden, Home Assistant's recorder, Oikos itself) is one hop away, with the single sign-on
consumers and CI two hops away.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from oikos_sim.clock import ago
from oikos_sim.records import Entity, Relation
from oikos_sim.seed.inventory import (
    DEPENDS_ON,
    DOMAIN,
    DRIFT,
    GUESTS,
    LAN,
    MESH,
    NODES,
    PG_DATA_DIR,
    PVE_KERNEL,
    PVE_VERSION,
    SERVICES,
)


def archive_failure_started(anchor: datetime) -> datetime:
    """When postgres's archive_command began failing, relative to the world's anchor time."""
    return ago(anchor, hours=9, minutes=18)


def _host_entities(anchor: datetime) -> list[Entity]:
    hosts = []
    for index, node in enumerate(NODES, start=1):
        hosts.append(
            Entity(
                slug=f"host:{node.name}",
                type="host",
                name=node.name,
                description=f"Proxmox VE node {node.name} ({node.hardware})",
                state="online",
                health="healthy",
                health_reason=None,
                version=f"pve-manager/{PVE_VERSION}",
                updated_at=ago(anchor, minutes=1),
                disk_pct=node.storage_pct,
                attrs={
                    "fqdn": f"{node.name}.{DOMAIN}",
                    "ip": f"{LAN}.{10 + index}",
                    "mesh_ip": f"{MESH}.{10 + index}",
                    "hardware": node.hardware,
                    "cpu": f"{node.cpu} ({node.threads} threads)",
                    "memory_gib": node.memory_gib,
                    "kernel": PVE_KERNEL,
                    "storage": node.storage,
                    "cluster": "hubris",
                },
            )
        )
    return hosts


def _guest_entities(anchor: datetime) -> list[Entity]:
    guests = []
    for guest in GUESTS:
        disk_pct = round(100 * guest.disk_used_gib / guest.disk_gib, 1)
        guests.append(
            Entity(
                slug=f"{guest.kind}:{guest.name}",
                type="lxc" if guest.kind == "lxc" else "vm",
                name=guest.name,
                description=guest.description,
                state="running",
                health="healthy",
                health_reason=None,
                version=guest.os,
                updated_at=ago(anchor, minutes=1),
                disk_pct=disk_pct,
                drift_count=DRIFT.get(f"{guest.kind}:{guest.name}", 0),
                attrs={
                    "vmid": guest.vmid,
                    "host": f"host:{guest.host}",
                    "hostname": f"{guest.name}.{DOMAIN}",
                    "ip": f"{LAN}.{guest.vmid}",
                    "os": guest.os,
                    "cores": guest.cores,
                    "memory_mib": guest.memory_mib,
                    "disk_gib": guest.disk_gib,
                    "disk_used_gib": guest.disk_used_gib,
                    "unprivileged": guest.kind == "lxc",
                    "onboot": True,
                    "started_at": anchor - timedelta(days=guest.uptime_days),
                },
            )
        )
    return guests


def _service_entities(anchor: datetime) -> list[Entity]:
    guest_kind = {guest.name: guest.kind for guest in GUESTS}
    services = []
    for service in SERVICES:
        guest_slug = f"{guest_kind[service.guest]}:{service.guest}"
        attrs = {
            "unit": service.unit,
            "runs_on": guest_slug,
            "port": service.port,
            "protocol": service.protocol,
            "install": service.install,
            "endpoint": f"{service.protocol}://{service.guest}.{DOMAIN}:{service.port}",
        }
        if service.public:
            attrs["public_url"] = f"https://{service.name}.{DOMAIN}"
        services.append(
            Entity(
                slug=f"service:{service.name}",
                type="service",
                name=service.name,
                description=service.description,
                state="active",
                health="healthy",
                health_reason=None,
                version=service.version,
                updated_at=ago(anchor, minutes=1),
                drift_count=DRIFT.get(f"service:{service.name}", 0),
                attrs=attrs,
            )
        )
    return services


def _degrade_postgres(entities: dict[str, Entity], anchor: datetime) -> None:
    failing_since = archive_failure_started(anchor).strftime("%H:%M UTC")
    postgres = entities["service:postgres"]
    postgres.health = "degraded"
    postgres.health_reason = (
        f"data disk 91% full ({PG_DATA_DIR}: 58.3 of 64 GiB); pg_wal has grown to 17.9 GiB because "
        f"WAL archiving to pbs has failed since {failing_since} (archive_command exit 255)"
    )
    postgres.disk_pct = 91.1
    postgres.updated_at = ago(anchor, minutes=2)
    postgres.attrs |= {"data_directory": PG_DATA_DIR, "max_connections": 200, "archive_mode": "on"}


def fleet_entities(anchor: datetime) -> dict[str, Entity]:
    entities = {e.slug: e for e in _host_entities(anchor) + _guest_entities(anchor) + _service_entities(anchor)}
    _degrade_postgres(entities, anchor)
    return entities


def fleet_relations() -> list[Relation]:
    guest_kind = {guest.name: guest.kind for guest in GUESTS}
    relations = [Relation(f"{g.kind}:{g.name}", "runs_on", f"host:{g.host}", f"vmid {g.vmid}") for g in GUESTS]
    relations += [
        Relation(f"service:{s.name}", "runs_on", f"{guest_kind[s.guest]}:{s.guest}", s.unit) for s in SERVICES
    ]
    relations += [
        Relation(f"service:{source}", "depends_on", f"service:{target}", note) for source, target, note in DEPENDS_ON
    ]
    relations += [
        Relation(f"service:{s.name}", "fronted_by", "service:caddy", f"{s.name}.{DOMAIN}")
        for s in SERVICES
        if s.public and s.name != "caddy"
    ]
    return relations
