# ruff: noqa: E501 - the inventory keeps one row per machine and per service, like a spreadsheet.
"""The homelab's inventory as data: Proxmox nodes, their guests, the services and who needs whom."""

from __future__ import annotations

from dataclasses import dataclass

DOMAIN = "hubris.network"
LAN = "10.20.0"  # a guest's last octet is its VMID
MESH = "100.74.12"
PVE_VERSION = "8.4.1"
PVE_KERNEL = "6.8.12-11-pve"
DEBIAN = "debian-12-standard_12.7-1"


@dataclass(frozen=True)
class Node:
    name: str
    hardware: str
    cpu: str
    threads: int
    memory_gib: int
    storage_pct: float
    storage: str


@dataclass(frozen=True)
class Guest:
    name: str
    kind: str  # "lxc" | "vm"
    vmid: int
    host: str
    os: str
    cores: int
    memory_mib: int
    disk_gib: int
    disk_used_gib: float
    uptime_days: float
    description: str


@dataclass(frozen=True)
class Service:
    name: str
    guest: str
    version: str
    unit: str
    port: int
    protocol: str
    public: bool
    install: str
    description: str


# fmt: off
NODES: tuple[Node, ...] = (
    Node("pve1", "Minisforum MS-01", "Intel Core i9-12900H", 20, 96, 41.0, "local-zfs (rpool, 2x 2 TB NVMe mirror)"),
    Node("pve2", "Lenovo ThinkCentre M920q", "Intel Core i7-8700T", 12, 64, 63.0, "local-lvm (1 TB NVMe)"),
    Node("pve3", "Supermicro X11SCH-F", "Intel Xeon E-2236", 12, 64, 28.0, "local-zfs (2x 480 GB SSD mirror)"),
)

GUESTS: tuple[Guest, ...] = (
    Guest("adguard", "lxc", 100, "pve1", DEBIAN, 1, 512, 4, 1.3, 41.2, "AdGuard Home, the LAN's DNS resolver"),
    Guest("caddy", "lxc", 101, "pve1", DEBIAN, 2, 1024, 8, 2.1, 12.6, "Caddy reverse proxy for *.hubris.network"),
    Guest("authentik", "lxc", 102, "pve1", DEBIAN, 2, 3072, 16, 7.4, 12.6, "authentik SSO (docker compose: server, worker)"),
    Guest("vaultwarden", "lxc", 106, "pve1", DEBIAN, 1, 512, 8, 1.9, 41.2, "Vaultwarden password manager"),
    Guest("oikos", "lxc", 130, "pve1", DEBIAN, 4, 4096, 32, 11.2, 3.4, "Oikos control plane and the Hermes agent"),
    Guest("homeassistant", "vm", 200, "pve1", "haos-13.2", 2, 4096, 32, 14.8, 41.2, "Home Assistant OS"),
    Guest("postgres", "lxc", 103, "pve2", DEBIAN, 4, 8192, 64, 58.3, 27.9, "Shared PostgreSQL 16 cluster (main)"),
    Guest("redis", "lxc", 104, "pve2", DEBIAN, 1, 1024, 4, 0.9, 27.9, "Redis 7 for authentik and gitea"),
    Guest("gitea", "lxc", 105, "pve2", DEBIAN, 2, 2048, 32, 12.7, 27.9, "Gitea, git.hubris.network"),
    Guest("woodpecker", "lxc", 107, "pve2", DEBIAN, 2, 4096, 32, 18.1, 6.1, "Woodpecker CI server and agent"),
    Guest("monitoring", "lxc", 120, "pve2", DEBIAN, 2, 4096, 64, 31.5, 27.9, "Prometheus and Grafana"),
    Guest("jellyfin", "lxc", 110, "pve3", DEBIAN, 4, 6144, 32, 19.6, 9.8, "Jellyfin with Intel Quick Sync (renderD128 passthrough)"),
    Guest("arr", "lxc", 111, "pve3", DEBIAN, 2, 3072, 16, 6.2, 9.8, "Sonarr and Radarr"),
    Guest("jellyseerr", "lxc", 112, "pve3", DEBIAN, 1, 1024, 8, 2.4, 9.8, "Jellyseerr media requests"),
    Guest("truenas", "vm", 210, "pve3", "truenas-scale-24.10.0.2", 4, 32768, 32, 9.1, 58.0, "TrueNAS SCALE with the LSI 9207-8i HBA passed through (pool tank)"),
    Guest("pbs", "vm", 211, "pve3", "proxmox-backup-server-3.2", 2, 4096, 32, 6.8, 58.0, "Proxmox Backup Server, datastore hubris on tank/pbs"),
)

SERVICES: tuple[Service, ...] = (
    Service("adguard", "adguard", "0.107.55", "AdGuardHome.service", 53, "dns", False, "binary", "DNS for the LAN and the mesh"),
    Service("caddy", "caddy", "2.8.4", "caddy.service", 443, "https", True, "apt", "TLS edge for every *.hubris.network vhost"),
    Service("authentik", "authentik", "2024.10.4", "authentik.service", 9443, "https", True, "docker compose", "Single sign-on (OIDC and forward auth)"),
    Service("vaultwarden", "vaultwarden", "1.32.5", "vaultwarden.service", 8000, "http", True, "binary", "Bitwarden-compatible password manager"),
    Service("oikos", "oikos", "0.14.2", "oikos.service", 8090, "http", True, "binary", "Oikos control plane: inventory, policy, actuator, MCP"),
    Service("hermes", "oikos", "0.1.0", "hermes.service", 8092, "http", True, "python", "Hermes, the resident operator agent"),
    Service("home-assistant", "homeassistant", "2024.11.3", "home-assistant (supervisor)", 8123, "http", True, "haos", "Home automation; recorder on PostgreSQL"),
    Service("postgres", "postgres", "16.4", "postgresql@16-main.service", 5432, "tcp", False, "apt", "Shared PostgreSQL cluster"),
    Service("redis", "redis", "7.2.6", "redis-server.service", 6379, "tcp", False, "apt", "Cache and task queue"),
    Service("gitea", "gitea", "1.22.3", "gitea.service", 3000, "http", True, "binary", "Git forge"),
    Service("woodpecker", "woodpecker", "2.7.1", "woodpecker-server.service", 8000, "http", True, "binary", "CI pipelines for gitea"),
    Service("prometheus", "monitoring", "2.55.1", "prometheus.service", 9090, "http", True, "binary", "Metrics scraping and alert rules"),
    Service("grafana", "monitoring", "11.3.1", "grafana-server.service", 3000, "http", True, "apt", "Dashboards"),
    Service("jellyfin", "jellyfin", "10.9.11", "jellyfin.service", 8096, "http", True, "apt", "Media server with hardware transcoding"),
    Service("sonarr", "arr", "4.0.11.2680", "sonarr.service", 8989, "http", True, "binary", "TV library manager"),
    Service("radarr", "arr", "5.14.0.9383", "radarr.service", 7878, "http", True, "binary", "Movie library manager"),
    Service("jellyseerr", "jellyseerr", "2.1.0", "jellyseerr.service", 5055, "http", True, "binary", "Media requests for the household"),
    Service("nfs-media", "truenas", "24.10.0.2", "nfs-server.service", 2049, "nfs", False, "truenas", "NFSv4 export tank/media for the media stack"),
    Service("pbs", "pbs", "3.2.7", "proxmox-backup-proxy.service", 8007, "https", False, "apt", "Backups of every guest and postgres WAL archive"),
)

# (source, target, note): source needs target to work.
DEPENDS_ON: tuple[tuple[str, str, str], ...] = (
    ("authentik", "postgres", "database authentik"),
    ("authentik", "redis", "cache and task queue"),
    ("gitea", "postgres", "database gitea"),
    ("gitea", "redis", "sessions and queues"),
    ("vaultwarden", "postgres", "database vaultwarden"),
    ("home-assistant", "postgres", "recorder database homeassistant"),
    ("oikos", "postgres", "database oikos (TimescaleDB)"),
    ("hermes", "oikos", "MCP tools and REST API"),
    ("woodpecker", "gitea", "forge OAuth and webhooks"),
    ("grafana", "authentik", "OIDC login"),
    ("grafana", "prometheus", "datasource"),
    ("sonarr", "authentik", "forward auth"),
    ("radarr", "authentik", "forward auth"),
    ("sonarr", "nfs-media", "library /mnt/media/tv"),
    ("radarr", "nfs-media", "library /mnt/media/movies"),
    ("jellyfin", "nfs-media", "library /mnt/media"),
    ("jellyseerr", "jellyfin", "library sync and auth"),
    ("jellyseerr", "sonarr", "TV requests"),
    ("jellyseerr", "radarr", "movie requests"),
)
# fmt: on

PG_DATA_DIR = "/var/lib/postgresql/16/main"
DRIFT = {"lxc:caddy": 1, "service:home-assistant": 2, "lxc:arr": 1}
